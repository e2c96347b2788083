"""apply_patch against shared/specs/v4a.md: one case per rule, accepted and rejected."""
import pytest

from mstar.patch import PatchError, apply_patch, apply_patch_detailed

SRC = """import json


class Animal:
    def speak(self):
        return "..."


class Dog(Animal):
    def speak(self):
        return "woof"

    def fetch(self, thing):
        return thing


def main():
    d = Dog()
    print(d.speak())
"""


def P(*body: str, header: str = "*** Update File: program.py") -> str:
    """A well-formed patch around the given body lines."""
    return "\n".join(["*** Begin Patch", header, *body, "*** End Patch"]) + "\n"


WOOF = ("@@ class Dog(Animal):", "     def speak(self):", '-        return "woof"', '+        return "WOOF"')
WOOF_SRC = SRC.replace('"woof"', '"WOOF"')


def rejected(original: str, patch: str, rule: str) -> str:
    with pytest.raises(PatchError) as info:
        apply_patch(original, patch)
    assert info.value.rule == rule, str(info.value)
    return str(info.value)


# ---------------------------------------------------------------- envelope (4.2)

def test_patch_wrapped_in_commit_message_fence_and_prose():
    reply = ("*** Commit Message\nTitle: louder dog\n- the dog is too quiet\n\nHere is the patch:\n\n"
             "```diff\n" + P(*WOOF) + "```\n\nThis makes the dog louder.\n")
    assert apply_patch(SRC, reply) == WOOF_SRC


def test_heredoc_wrapper_is_ignored():
    reply = "apply_patch <<'EOF'\n" + P(*WOOF) + "EOF\n"
    assert apply_patch(SRC, reply) == WOOF_SRC


def test_missing_end_patch_ends_at_fence_or_end_of_text():
    no_end = "\n".join(["*** Begin Patch", "*** Update File: program.py", *WOOF])
    assert apply_patch(SRC, no_end) == WOOF_SRC
    assert apply_patch(SRC, "```\n" + no_end + "\n```\nDone, the dog barks now.") == WOOF_SRC
    assert apply_patch(SRC, no_end + "\n\n\n") == WOOF_SRC


def test_decorated_and_padded_markers():
    patch = "\n".join(["  *** Begin Patch ***", "*** Update File: program.py   ", *WOOF, "   *** End Patch ***  "])
    assert apply_patch(SRC, patch) == WOOF_SRC


def test_missing_begin_with_file_header():
    patch = "Sure.\n*** Update File: program.py\n" + "\n".join(WOOF) + "\n*** End Patch\nEOF\n"
    assert apply_patch(SRC, patch) == WOOF_SRC


def test_begin_without_file_header_is_an_update_of_program_py():
    assert apply_patch(SRC, "*** Begin Patch\n" + "\n".join(WOOF) + "\n*** End Patch") == WOOF_SRC


def test_bare_body_starting_with_at_at():
    assert apply_patch(SRC, "\n\n" + "\n".join(WOOF) + "\n") == WOOF_SRC


def test_prose_before_bare_body_is_not_a_patch():
    msg = rejected(SRC, "Change this:\n" + "\n".join(WOOF), "no-patch")
    assert "no V4A patch found" in msg


def test_two_begin_lines_are_rejected():
    msg = rejected(SRC, P(*WOOF) + "\n" + P(*WOOF), "multiple-begin")
    assert "one patch per reply" in msg


def test_begin_and_end_only_is_an_empty_patch():
    assert "empty patch" in rejected(SRC, "*** Begin Patch\n\n*** End Patch\n", "empty-patch")


# ---------------------------------------------------------------- normalisation, output (4.1, 4.5)

def test_crlf_file_keeps_crlf_with_lf_patch():
    crlf = SRC.replace("\n", "\r\n")
    assert apply_patch(crlf, P(*WOOF)) == WOOF_SRC.replace("\n", "\r\n")


def test_crlf_patch_on_lf_file():
    assert apply_patch(SRC, P(*WOOF).replace("\n", "\r\n")) == WOOF_SRC


def test_mixed_line_ends_become_crlf():
    assert apply_patch("a\r\nb\nc\n", P("@@", " a", "-b", "+B")) == "a\r\nB\r\nc\r\n"


def test_missing_final_newline_is_preserved():
    assert apply_patch("a\nb\nc", P("@@", " b", "-c", "+C", "+D")) == "a\nb\nC\nD"


def test_insertion_into_empty_file_ends_with_newline():
    assert apply_patch("", P("@@", "+x = 1", "+y = 2")) == "x = 1\ny = 2\n"


def test_deleting_every_line_gives_empty_text():
    assert apply_patch("a\nb\n", P("@@", "-a", "-b")) == ""


# ---------------------------------------------------------------- file headers (4.3)

@pytest.mark.parametrize("path", ["./program.py", "/abs/dir/program.py", "'program.py'", "`program.py`",
                                  "  program.py  ", "dir\\program.py"])
def test_update_path_is_checked_by_basename(path):
    assert apply_patch(SRC, P(*WOOF, header=f"*** Update File: {path}")) == WOOF_SRC


def test_other_file_is_rejected():
    msg = rejected(SRC, P(*WOOF, header="*** Update File: utils.py"), "wrong-file")
    assert "only program.py can be edited" in msg and "utils.py" in msg


def test_filename_keyword_changes_the_target():
    assert apply_patch(SRC, P(*WOOF, header="*** Update File: memory.py"), filename="memory.py") == WOOF_SRC
    with pytest.raises(PatchError, match="only memory.py can be edited"):
        apply_patch(SRC, P(*WOOF), filename="memory.py")


def test_move_to_same_name_ok_other_name_rejected():
    assert apply_patch(SRC, P("*** Move to: src/program.py", *WOOF)) == WOOF_SRC
    assert "only program.py" in rejected(SRC, P("*** Move to: new.py", *WOOF), "wrong-file")
    rejected(SRC, P(*WOOF, "*** Move to: program.py"), "misplaced-move")


def test_unified_diff_headers_are_dropped():
    assert apply_patch(SRC, P("--- a/program.py", "+++ b/program.py", *WOOF)) == WOOF_SRC


def test_delete_file_is_rejected():
    rejected(SRC, P(header="*** Delete File: program.py"), "delete-file")


def test_add_file_replaces_the_file():
    patch = P("+x = 1", "", "+", "+y = 2", "+", "", "", header="*** Add File: program.py")
    # blank line -> empty line, lone '+' is a line, trailing blank lines dropped, final newline added
    assert apply_patch("old = 0", patch) == "x = 1\n\n\ny = 2\n\n"
    result = apply_patch_detailed(SRC, P("+a", header="*** Add File: program.py"))
    assert result.text == "a\n" and result.replaced_file


def test_add_file_then_update_in_one_patch():
    patch = "\n".join(["*** Begin Patch", "*** Add File: program.py", "+a", "+b",
                       "*** Update File: program.py", "@@", " a", "-b", "+c", "*** End Patch"])
    assert apply_patch(SRC, patch) == "a\nc\n"


def test_add_file_rules():
    assert "only program.py" in rejected(SRC, P("+x", header="*** Add File: helper.py"), "wrong-file")
    assert "must start with '+'" in rejected(SRC, P("+x", " y", header="*** Add File: program.py"), "add-line")


def test_two_update_sections_apply_in_sequence():
    patch = "\n".join(["*** Begin Patch", "*** Update File: program.py", "@@", " a", "-b", "+B",
                       "*** Update File: program.py", "@@", "-a", "+A", "*** End Patch"])
    assert apply_patch("a\nb\n", patch) == "A\nB\n"


# ---------------------------------------------------------------- hunk syntax (4.3)

def test_line_number_header_is_bare():
    # "def nowhere" is ignored: it follows line numbers, so the hunk needs no such line.
    assert apply_patch(SRC, P("@@ -9,3 +9,3 @@ def nowhere", *WOOF[1:])) == WOOF_SRC


def test_trailing_at_at_removed_from_anchor():
    assert apply_patch(SRC, P("@@ class Dog(Animal): @@", *WOOF[1:])) == WOOF_SRC


def test_no_newline_marker_is_ignored():
    assert apply_patch("a\nb", P("@@", " a", "-b", "\\ No newline at end of file", "+c",
                                 "\\ No newline at end of file")) == "a\nc"


def test_context_without_leading_space():
    patch = P("@@", "def main():", "    d = Dog()", "-    print(d.speak())", "+    print(d.fetch(1))")
    assert apply_patch(SRC, patch) == SRC.replace("print(d.speak())", "print(d.fetch(1))")


def test_zero_length_line_is_empty_context():
    patch = P("@@", '         return "..."', "", "", "-class Dog(Animal):", "+class Dog:")
    assert apply_patch(SRC, patch) == SRC.replace("class Dog(Animal):", "class Dog:")


def test_unknown_marker_in_column_0_is_rejected():
    msg = rejected(SRC, P("*** Note: louder", *WOOF), "unknown-marker")
    assert "*** Note: louder" in msg and "patch line 3" in msg


def test_star_line_inside_docstring_is_context():
    src = 'def f():\n    """\n    *** NOTE ***\n    """\n    return 1\n'
    patch = P("@@", '     """', "     *** NOTE ***", '     """', "-    return 1", "+    return 2")
    assert apply_patch(src, patch) == src.replace("return 1", "return 2")


def test_end_of_file_needs_at_at_for_the_next_hunk():
    ok = P("@@", " a", "-b", "+B", "*** End of File", "", "@@", "+c", "*** End of File")
    assert apply_patch("a\nb\n", ok) == "a\nB\nc\n"
    bad = P("@@", " b", "-c", "+C", "*** End of File", "-a", "+A")
    msg = rejected("a\nb\nc\n", bad, "line-after-eof")
    assert "must start with an @@ line" in msg


def test_update_without_hunks_and_at_at_without_lines():
    assert "has no hunks" in rejected(SRC, P(""), "no-hunks")
    msg = rejected(SRC, P("@@ class Dog(Animal):", "@@     def speak(self):"), "empty-hunk")
    assert "def speak(self):" in msg
    rejected(SRC, P(*WOOF, "@@"), "empty-hunk")


def test_patch_without_changes_is_rejected():
    assert "no changes" in rejected(SRC, P("@@", " import json"), "no-changes")


def test_context_only_hunk_next_to_real_hunk_is_located():
    assert apply_patch(SRC, P("@@", " import json", *WOOF)) == WOOF_SRC
    rejected(SRC, P("@@", " import yaml", *WOOF), "context-not-found")


# ---------------------------------------------------------------- matching passes (4.4)

def test_whitespace_drift_and_typographic_punctuation_match_output_keeps_file_text():
    src = "x = 'a'  \n\ty = \"b\" - 1\nz = 3\n"
    patch = P("@@", " x = \u2018a\u2019", "     y = \u201cb\u201d \u2013 1", "-z = 3", "+z = 4")
    result = apply_patch_detailed(src, patch)
    assert result.text == "x = 'a'  \n\ty = \"b\" - 1\nz = 4\n"
    assert result.hunks[0].match_pass == "P3"


def test_pass_major_exact_match_beats_earlier_loose_match():
    src = "if a:\n    x = 1\nx = 1\n"
    result = apply_patch_detailed(src, P("@@", "-x = 1", "+x = 2"))
    assert result.text == "if a:\n    x = 1\nx = 2\n"
    assert (result.hunks[0].match_pass, result.hunks[0].position) == ("P0", 2)


def test_mis_indented_insert_after_loose_match_stays_mis_indented():
    src = "def f():\n    a = 1\n    return a\n"
    patch = P("@@", "a = 1", "+b = 2", " return a")
    assert apply_patch(src, patch) == "def f():\n    a = 1\nb = 2\n    return a\n"


# ---------------------------------------------------------------- anchors (4.4 step 2)

def test_partial_anchor_matches_on_word_boundary():
    src = "class Doggo:\n    x = 1\n\nclass Dog(Animal):\n    x = 1\n"
    assert apply_patch(src, P("@@ class Dog", "-    x = 1", "+    x = 2")) == \
        "class Doggo:\n    x = 1\n\nclass Dog(Animal):\n    x = 2\n"
    result = apply_patch_detailed(SRC, P("@@ def fetch", "-        return thing", "+        return [thing]"))
    assert result.hunks[0].anchor_passes == ["P4"]


def test_anchor_picks_the_right_duplicate_block():
    patch = P("@@ class Dog(Animal):", "     def speak(self):", '-        return "woof"', '+        return 1')
    assert apply_patch(SRC, patch) == SRC.replace('return "woof"', "return 1")


def test_stacked_anchors_narrow_the_scope():
    src = ("class A:\n    def run(self):\n        return 0\n\n    def stop(self):\n        return 0\n\n"
           "class B:\n    def run(self):\n        return 0\n\n    def stop(self):\n        return 0\n")
    patch = P("@@ class B:", "@@     def stop(self):", "-        return 0", "+        return 9")
    assert apply_patch(src, patch).rsplit("return", 1)[1] == " 9\n"
    assert apply_patch(src, patch).count("return 9") == 1


def test_anchor_repeated_as_first_context_line_is_inclusive():
    patch = P("@@ def fetch(self, thing):", "     def fetch(self, thing):",
              "-        return thing", "+        return [thing]")
    assert apply_patch(SRC, patch) == SRC.replace("return thing", "return [thing]")


def test_same_anchor_on_consecutive_hunks_is_already_satisfied():
    patch = P("@@ class Dog(Animal):", "     def speak(self):", '-        return "woof"', '+        return "WOOF"',
              "@@ class Dog(Animal):", "     def fetch(self, thing):", "-        return thing", "+        return [thing]")
    assert apply_patch(SRC, patch) == WOOF_SRC.replace("return thing", "return [thing]")


def test_anchor_already_passed_by_previous_hunk_is_skipped():
    # hunk 2's anchor "class Dog" lies above the cursor: the cursor is kept.
    patch = P(*WOOF, "@@ class Dog(Animal):", "@@ def main():", "     d = Dog()", "-    print(d.speak())",
              "+    print(d.fetch(2))")
    patch2 = P("@@ def fetch", "-        return thing", "+        return 1",
               "@@ class Dog(Animal):", "     d = Dog()", "-    print(d.speak())", "+    print(2)")
    assert "d.fetch(2)" in apply_patch(SRC, patch)
    assert apply_patch(SRC, patch2) == SRC.replace("return thing", "return 1").replace("print(d.speak())", "print(2)")


def test_anchor_that_occurs_nowhere_is_rejected():
    msg = rejected(SRC, P("@@ def bark(self):", '-        return "woof"', '+        return 1'), "anchor-not-found")
    assert "'@@ def bark(self):' not found" in msg and "hunk 1" in msg and "patch line 3" in msg


def test_second_anchor_must_follow_the_first():
    msg = rejected(SRC, P("@@ def main():", "@@ class Dog(Animal):", "-        return thing", "+        return 1"),
                   "anchor-not-found")
    assert "class Dog(Animal):" in msg


# ---------------------------------------------------------------- pure insertions (4.4 step 1)

def test_pure_insertion_after_anchor():
    patch = P("@@ def main():", "+    print('start')")
    assert apply_patch(SRC, patch) == SRC.replace("def main():\n", "def main():\n    print('start')\n")


def test_pure_insertion_at_end_of_file():
    assert apply_patch("a\nb", P("@@", "+c", "*** End of File")) == "a\nb\nc"
    assert apply_patch(SRC, P("@@", "+main()", "*** End of File")) == SRC + "main()\n"


def test_pure_insertion_without_position_is_rejected():
    msg = rejected(SRC, P("@@", "+import os"), "ambiguous-insertion")
    assert "ambiguous" in msg and "hunk 1" in msg


def test_pure_insertion_with_missing_anchor_is_rejected():
    rejected(SRC, P("@@ def nowhere():", "+    pass"), "anchor-not-found")


# ---------------------------------------------------------------- EOF hunks, blank retry, cursor

def test_eof_hunk_prefers_the_end_of_the_file():
    src = "x = 1\ny = 2\n\nx = 1\ny = 2\n"
    assert apply_patch(src, P("@@", " x = 1", "-y = 2", "+y = 3", "*** End of File")) == \
        "x = 1\ny = 2\n\nx = 1\ny = 3\n"
    assert apply_patch(src, P("@@", " x = 1", "-y = 2", "+y = 3")) == "x = 1\ny = 3\n\nx = 1\ny = 2\n"


def test_blank_line_between_hunks_not_in_file_is_retried_without_it():
    src = "a\nb\nc\nd\ne\nf\n"
    patch = P("@@", " a", "-b", "+B", " c", "", "@@", " d", "-e", "+E")
    result = apply_patch_detailed(src, patch)
    assert result.text == "a\nB\nc\nd\nE\nf\n"
    assert result.hunks[0].retried_without_blank and not result.hunks[1].retried_without_blank


def test_blank_retry_needs_a_line_left_and_still_reports_failure():
    msg = rejected("a\nb\n", P("@@", "", " zzz", "-b", "+c"), "context-not-found")
    assert "'zzz'" in msg


def test_hunks_out_of_order_are_rejected():
    patch = P("@@", " def main():", "-    d = Dog()", "+    d = Dog(1)", *WOOF)
    msg = rejected(SRC, patch, "out-of-order")
    assert "hunks must be in file order" in msg and "hunk 2" in msg


def test_hunks_sharing_a_context_line():
    src = "a\nb\nc\nd\ne\n"
    patch = P("@@", " a", "-b", "+B", " c", "@@", " c", "-d", "+D")
    assert apply_patch(src, patch) == "a\nB\nc\nD\ne\n"


def test_next_hunk_may_delete_previous_trailing_context():
    # the cursor stops after hunk 1's last change, so its trailing context is reusable
    src = "a\nb\nc\nd\n"
    assert apply_patch(src, P("@@", " a", "-b", "+B", " c", " d", "@@", "-c", "+C")) == "a\nB\nC\nd\n"


def test_context_only_hunk_sets_cursor_to_its_start():
    src = "a\nb\nc\nb\n"
    assert apply_patch(src, P("@@", " c", "@@", "-b", "+B")) == "a\nb\nc\nB\n"


def test_partly_wrong_patch_is_rejected_whole():
    # hunk 1 is fine, hunk 2 is not: nothing is applied, the caller keeps the original text
    msg = rejected(SRC, P(*WOOF, "@@ def main():", "-    print(d.bark())", "+    print(1)"), "context-not-found")
    assert msg.startswith("hunk 2")


# ---------------------------------------------------------------- messages (4.6)

def test_context_failure_names_the_first_diverging_line():
    patch = P("@@", " class Dog(Animal):", "     def speak(self):", '-        return "meow"', '+        return "x"')
    msg = rejected(SRC, patch, "context-not-found")
    assert "hunk 1 (patch line 3)" in msg
    assert "class Dog(Animal):" in msg and 'return "meow"' in msg          # the expected lines
    assert "first difference at file line 11 (patch line 6)" in msg
    assert "'        return \"woof\"'" in msg                                # what the file has there


def test_context_failure_with_no_line_in_common_points_at_a_similar_line():
    msg = rejected(SRC, P("@@", "-    def spek(self, x):", "+    pass"), "context-not-found")
    assert "None of these lines" in msg and "def speak(self):" in msg


def test_error_is_a_value_error_with_location():
    with pytest.raises(ValueError) as info:
        apply_patch(SRC, P(*WOOF, "@@ def nowhere():", "-x", "+y"))
    assert (info.value.hunk, info.value.patch_line) == (2, 7)


def test_detailed_report_is_json_ready():
    import json
    result = apply_patch_detailed(SRC, P(*WOOF, "@@", "+main()", "*** End of File"))
    data = json.loads(json.dumps(result.to_dict()))
    assert [h["match_pass"] for h in data["hunks"]] == ["P0", "eof"]
    assert data["hunks"][0]["position"] == 9 and data["hunks"][0]["anchor_passes"] == ["P0"]


def test_bad_argument_types():
    with pytest.raises(TypeError):
        apply_patch(None, P(*WOOF))
    with pytest.raises(ValueError):
        apply_patch(SRC, P(*WOOF), filename="dir/program.py")


def test_eof_insertion_after_an_earlier_hunk_in_the_same_scope():
    patch = P("@@ def main():", "     d = Dog()", "-    print(d.speak())", "+    print(d.fetch(3))",
              "@@ def main():", "+    return d", "*** End of File")
    assert apply_patch(SRC, patch) == SRC.replace("print(d.speak())", "print(d.fetch(3))") + "    return d\n"


def test_lines_above_their_anchor_are_reported_as_such():
    msg = rejected(SRC, P("@@ def main():", "-import json", "+import re"), "above-anchor")
    assert "before its '@@' anchor (line 17)" in msg and "at line 1" in msg


def test_anchor_only_above_the_cursor_after_a_match_is_reported():
    msg = rejected(SRC, P("@@ def main():", "@@ class Dog(Animal):", " x", "+y"), "anchor-not-found")
    assert "occurs only above, at line 9" in msg


# ---------------------------------------------------------------- replies as models write them

MODEL_REPLY = """*** Commit Message
Title: Louder dog, safer main
- Diagnosis: answers miss the dog's sound because speak() is too quiet.
- Change: shout in Dog.speak and guard main.

```
*** Begin Patch ***
*** Update File: ./program.py
--- a/program.py
+++ b/program.py
@@ -9,4 +9,4 @@ class Dog(Animal):
 class Dog(Animal):
     def speak(self):
-        return \u201cwoof\u201d
+        return "WOOF"

@@ def main():
def main():
     d = Dog()
-    print(d.speak())
+    if d:
+        print(d.speak())
\\ No newline at end of file
```

Let me know if you want more changes.
"""


def test_model_reply_with_many_quirks_at_once():
    # fence + prose + commit message, decorated Begin, ./path, ---/+++ and line-number
    # headers, typographic quotes, blank line between hunks, column-0 context, no End Patch
    crlf_reply = MODEL_REPLY.replace("\n", "\r\n")
    expected = WOOF_SRC.replace("    print(d.speak())\n", "    if d:\n        print(d.speak())\n")
    assert apply_patch(SRC, MODEL_REPLY) == expected
    assert apply_patch(SRC.replace("\n", "\r\n"), crlf_reply) == expected.replace("\n", "\r\n")
    reports = apply_patch_detailed(SRC, MODEL_REPLY).hunks
    assert [r.match_pass for r in reports] == ["P3", "P0"]
    assert (reports[0].anchor_passes, reports[1].anchor_passes) == ([], ["P0"])  # line numbers are no anchor
