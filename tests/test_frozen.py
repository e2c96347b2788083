import pytest

from mstar.program.frozen import FrozenPartError, check_frozen, split_program

SEED = open("seeds/vector_search.py").read()


def test_split_finds_all_four_constants_including_parenthesised_values():
    code, values = split_program(SEED)
    assert set(values) == {"INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE",
                           "ALWAYS_ON_KNOWLEDGE"}
    assert values["ALWAYS_ON_KNOWLEDGE"] == '""'
    assert "Read the text" in values["INSTRUCTION_KNOWLEDGE_ITEM"] and "Read the text" not in code


def test_instruction_edit_passes_instructions_mode_and_fails_code_mode():
    child = SEED.replace("Be short and specific.", "Use at most 5 words.")
    check_frozen(SEED, child, "instructions")
    with pytest.raises(FrozenPartError, match="INSTRUCTION_RESPONSE"):
        check_frozen(SEED, child, "code")


def test_code_edit_passes_code_mode_and_fails_instructions_mode():
    child = SEED.replace("min(5, self.doc_count)", "min(9, self.doc_count)")
    check_frozen(SEED, child, "code")
    with pytest.raises(FrozenPartError, match="first difference: line"):
        check_frozen(SEED, child, "instructions")
    check_frozen(SEED, child, "all")


def test_a_constant_named_inside_a_function_is_code_not_instruction():
    src = SEED + "\n\ndef helper():\n    INSTRUCTION_QUERY = 'local'\n    return INSTRUCTION_QUERY\n"
    child = src.replace("'local'", "'changed'")
    with pytest.raises(FrozenPartError):
        check_frozen(src, child, "instructions")


def test_comments_are_not_code():
    child = SEED.replace('INSTRUCTION_RESPONSE = "', '# answers were too long\nINSTRUCTION_RESPONSE = "')
    child = child.replace("Be short and specific.", "Use at most 5 words.")
    check_frozen(SEED, child, "instructions")
