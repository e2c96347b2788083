"""make_patch: apply_patch(old, make_patch(old, new)) == new, on hard cases and on random edits."""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mstar.patch import make as patch_make
from mstar.patch import PatchError, apply_patch, apply_patch_detailed, make_patch

SEEDS = {p.name: p.read_text() for p in sorted((Path(__file__).parent.parent / "seeds").glob("*.py"))
         if not p.name.startswith("_")}
assert len(SEEDS) >= 3, "the seed programs are the test corpus"

TWINS = """class A:
    def get(self, key):
        value = self.data.get(key)
        if value is None:
            return ""
        return value


class B:
    def get(self, key):
        value = self.data.get(key)
        if value is None:
            return ""
        return value
"""

CASES = {
    "change in the second of two identical methods": (TWINS, TWINS[::-1].replace('""', "'x'", 1)[::-1]),
    "insert at start": ("a\nb\nc\n", "new\na\nb\nc\n"),
    "append at end": ("a\nb\nc\n", "a\nb\nc\nd\ne\n"),
    "delete first and last": ("a\nb\nc\nd\n", "b\nc\n"),
    "repeated lines, change the 4th": ("x\ny\n" * 5, "x\ny\n" * 3 + "x\nY\n" + "x\ny\n"),
    "blank lines only": ("\n\n\n\n", "\n\n\nz\n\n"),
    "old without final newline": ("a\nb", "a\nc"),
    "add final newline": ("a\nb", "a\nb\n"),
    "drop everything, keep final newline rule": ("a\nb", ""),
    "empty old": ("", "x = 1\n"),
    "empty new": ("a\nb\n", ""),
    "both empty": ("", ""),
    "only a newline": ("\n", "\n\n"),
    "identical": (SEEDS["llm_summarizer.py"], SEEDS["llm_summarizer.py"]),
    "crlf": ("a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\nd\r\n"),
    "lines that look like patch syntax": (
        "s = '''\n*** End Patch\n@@ x @@\n\\ No newline\n*** Update File: other.py\n```\n'''\nt = 1\n",
        "s = '''\n*** End Patch\n@@ x @@\n\\ No newline\n*** Update File: other.py\n```\n'''\nt = 2\n"),
    "marker lines as deleted and added text": ("a\n*** Begin Patch\nb\n", "a\n*** End of File\nb\n@@\n"),
    "whitespace-only differences": ("def f():\n    x = 1\n", "def f():\n\tx = 1  \n"),
    "typographic quote vs ascii": ("x = '\u2018'\nx = \"'\"\n", "x = '\u2018'\nx = 1\n"),
}


@pytest.mark.parametrize("context", [0, 1, 3])
@pytest.mark.parametrize("name", list(CASES))
def test_round_trip_hard_cases(name, context):
    old, new = CASES[name]
    patch = make_patch(old, new, context=context)
    assert patch.startswith("*** Begin Patch\n") and patch.endswith("*** End Patch\n")
    assert apply_patch(old, patch) == new


def test_patch_looks_like_what_the_model_is_taught():
    old = SEEDS["experience_learner.py"]
    new = old.replace("self.facts.append(item.fact_to_remember)",
                      "if item.fact_to_remember:\n            self.facts.append(item.fact_to_remember)")
    patch = make_patch(old, new)
    assert patch.splitlines()[:3] == ["*** Begin Patch", "*** Update File: program.py",
                                      "@@     def write(self, item: KnowledgeItem, raw_text: str) -> None:"]
    assert "-        self.facts.append(item.fact_to_remember)" in patch
    assert sum(line.startswith(" ") for line in patch.splitlines()) <= 6  # 3 lines above and below at most
    assert apply_patch(old, patch) == new


def test_anchor_or_context_disambiguates_duplicate_methods():
    new = TWINS.replace("        return value\n", "        return value.strip()\n")  # both methods
    new = new.replace("        return value.strip()\n", "        return value\n", 1)   # undo the first
    patch = make_patch(TWINS, new)
    assert apply_patch(TWINS, patch) == new
    assert apply_patch_detailed(TWINS, patch).hunks[0].position > 8


def test_path_keyword():
    patch = make_patch("a\n", "b\n", path="work/memory.py")
    assert "*** Update File: work/memory.py" in patch
    assert apply_patch("a\n", patch, filename="memory.py") == "b\n"


@pytest.mark.parametrize("old,new,why", [
    ("a\n", "a", "final newline"),
    ("", "x", "final newline"),
    ("a\r\nb\r\n", "a\nb\n", "CRLF"),
    ("a\nb\n", "a\r\nb\r\n", "cannot introduce CRLF"),
])
def test_unrepresentable_changes_raise(old, new, why):
    with pytest.raises(PatchError, match=why) as info:
        make_patch(old, new)
    assert info.value.rule == "unrepresentable"


def test_bad_arguments():
    with pytest.raises(ValueError):
        make_patch("a", "b", context=-1)
    with pytest.raises(TypeError):
        make_patch(b"a", "b")


# ---------------------------------------------------------------- property tests

# Lines the edits draw from: the seed's own lines (duplicates make context ambiguous),
# blank lines, and lines that look like patch syntax.
EXTRA = ["", "", "    ", "        return x", "*** End Patch", "@@ def x", "    pass"]


@st.composite
def seed_edit(draw):
    name = draw(st.sampled_from(sorted(SEEDS)))
    old = SEEDS[name]
    lines = old.splitlines()
    pool = lines + EXTRA
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        at = draw(st.integers(0, len(lines)))
        payload = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))
        if kind == "insert":
            lines[at:at] = payload
        elif kind == "delete":
            del lines[at:at + draw(st.integers(1, 4))]
        elif kind == "replace":
            lines[at:at + draw(st.integers(1, 3))] = payload
        else:  # copy a block elsewhere: the classic ambiguous-context trap
            src = draw(st.integers(0, max(0, len(lines) - 1)))
            lines[at:at] = lines[src:src + draw(st.integers(1, 5))]
    return old, "".join(line + "\n" for line in lines)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edit=seed_edit(), context=st.integers(0, 4))
def test_random_edits_of_seed_programs_round_trip(edit, context):
    old, new = edit
    patch = make_patch(old, new, context=context)
    assert apply_patch(old, patch) == new
    # The ordinary hunked patch is right by construction; no fallback was needed.
    old_lines, new_lines = old.splitlines(), new.splitlines()
    assert patch_make._update_patch(old_lines, new_lines, context, "program.py") is not None or old == new


@settings(max_examples=150, deadline=None)
@given(edit=seed_edit())
def test_random_edits_round_trip_with_crlf(edit):
    old, new = (t.replace("\n", "\r\n") for t in edit)
    assert apply_patch(old, make_patch(old, new)) == new


ALPHABET = ["a", "b", "", " ", "  a", "def f():", "@@ a", "*** End Patch", "\\ x", "+a", "-b", "\u2018a\u2019"]


@settings(max_examples=300, deadline=None)
@given(old=st.lists(st.sampled_from(ALPHABET), max_size=12), new=st.lists(st.sampled_from(ALPHABET), max_size=12),
       old_nl=st.booleans(), new_nl=st.booleans(), context=st.integers(0, 3))
def test_random_small_alphabet_texts(old, new, old_nl, new_nl, context):
    old_text = "\n".join(old) + ("\n" if old_nl and old else "")
    new_text = "\n".join(new) + ("\n" if new_nl and new else "")
    old_has_final_nl = old_text == "" or old_text.endswith("\n")
    representable = not (old_has_final_nl and new_text and not new_text.endswith("\n"))
    if representable:
        assert apply_patch(old_text, make_patch(old_text, new_text, context=context)) == new_text
    else:
        with pytest.raises(PatchError, match="final newline"):
            make_patch(old_text, new_text, context=context)
