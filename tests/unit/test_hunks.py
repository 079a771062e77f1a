"""The hunks of a proposed edit: splitting, writing a subset, checking answers, the wording."""

from __future__ import annotations

import difflib
import random

from heddle.core.hunks import (HunkDecision, apply, check, describe, outcomes, rejection_message,
                               review, reviewable, split)

BEFORE = "".join(f"line {i}\n" for i in range(1, 21))
AFTER = BEFORE.replace("line 2\n", "line two\n").replace("line 15\n", "line 15\nextra\n")


def test_split_gives_the_hunks_of_the_unified_diff():
    hunks = split(BEFORE, AFTER)
    assert [(h.index, h.old_start, h.old_lines, h.new_start, h.new_lines) for h in hunks] == [
        (0, 1, 5, 1, 5), (1, 13, 6, 13, 7)]
    assert hunks[0].diff == ("@@ -1,5 +1,5 @@\n line 1\n-line 2\n+line two\n line 3\n line 4\n"
                             " line 5\n")
    body = "".join(difflib.unified_diff(BEFORE.splitlines(True), AFTER.splitlines(True)))
    assert body.split("\n", 2)[2] == "".join(h.diff for h in hunks)


def test_nearby_changes_are_one_hunk_and_a_new_file_is_one():
    near = BEFORE.replace("line 2\n", "2\n").replace("line 6\n", "6\n")
    assert len(split(BEFORE, near)) == 1
    (new,) = split("", "a\nb\n")
    assert (new.old_start, new.old_lines, new.new_start, new.new_lines) == (0, 0, 1, 2)
    assert split("same\n", "same\n") == ()


def test_apply_writes_exactly_the_accepted_hunks():
    assert apply(BEFORE, AFTER, set()) == BEFORE
    assert apply(BEFORE, AFTER, {0, 1}) == AFTER
    assert apply(BEFORE, AFTER, {0}) == BEFORE.replace("line 2\n", "line two\n")
    assert apply(BEFORE, AFTER, {1}) == BEFORE.replace("line 15\n", "line 15\nextra\n")


def test_apply_of_all_or_none_is_after_or_before_for_any_texts():
    rng = random.Random(16)
    for _ in range(300):
        words = ["a\n", "b\n", "c\n", "d", "\n", "e\r\n"]
        before = "".join(rng.choices(words, k=rng.randrange(0, 30)))
        after = "".join(rng.choices(words, k=rng.randrange(0, 30)))
        n = len(split(before, after))
        assert apply(before, after, set(range(n))) == after
        assert apply(before, after, set()) == before
        # each hunk on its own changes only its own lines: applying it then the rest is after
        for k in range(n):
            part = apply(before, after, {k})
            assert apply(part, after, set(range(len(split(part, after))))) == after


def test_check_refuses_unknown_and_repeated_indices():
    hunks = split(BEFORE, AFTER)
    assert check(hunks, [HunkDecision(1, "reject")]) is None
    assert check(hunks, [HunkDecision(2, "reject")]) == "hunk index 2 is not one of the 2 hunks offered"
    assert check(hunks, [HunkDecision(-1, "accept")]) is not None
    assert check(hunks, [HunkDecision(0, "accept"), HunkDecision(0, "reject")]) == \
        "hunk 0 is answered twice"
    assert check((), [HunkDecision(0, "accept")]) == "the request offered no hunks"


def test_review_is_none_for_the_whole_proposal():
    hunks = split(BEFORE, AFTER)
    assert review(BEFORE, AFTER, hunks, [], None) is None
    assert review(BEFORE, AFTER, hunks, [HunkDecision(0, "accept")], None) is None
    assert review(BEFORE, AFTER, hunks, [], AFTER) is None  # finalText unchanged
    r = review(BEFORE, AFTER, hunks, [HunkDecision(1, "reject", "no extra")], None)
    assert r.written == BEFORE.replace("line 2\n", "line two\n") and not r.edited
    assert r.decisions == outcomes(hunks, [HunkDecision(1, "reject", "no extra")])
    mine = review(BEFORE, AFTER, hunks, [HunkDecision(1, "reject")], "mine\n")
    assert mine.written == "mine\n" and mine.edited  # finalText wins over hunks


def test_describe_tells_the_model_what_was_applied_and_rejected():
    hunks = split(BEFORE, AFTER)
    r = review(BEFORE, AFTER, hunks, [HunkDecision(1, "reject", "no extra")], None)
    assert describe("app.py", r) == (
        "Edited app.py with 1 of 2 hunks of your change; the user rejected the other, so the "
        "file is not what you proposed.\n"
        "Applied: hunk 1 of 2 (lines 1-5).\n"
        'Rejected: hunk 2 of 2 (lines 13-18), the user said: "no extra".\n'
        "(Line ranges are of the file before the edit.)\n"
        "The diff from your proposal to what was written:\n"
        "--- app.py (proposed)\n+++ app.py (written)\n"
        "@@ -13,7 +13,6 @@\n line 13\n line 14\n line 15\n-extra\n line 16\n line 17\n line 18\n")


def test_describe_of_the_users_own_text():
    r = review("a\n", "b\n", split("a\n", "b\n"), [], "c\n")
    assert describe("x.txt", r) == (
        "Edited x.txt with the user's own version of your change: the user edited the proposal "
        "before accepting it, so the file is not what you proposed.\n"
        "The diff from your proposal to what was written:\n"
        "--- x.txt (proposed)\n+++ x.txt (written)\n@@ -1 +1 @@\n-b\n+c\n")


def test_rejection_message_and_reviewable():
    assert rejection_message([HunkDecision(0, "reject", "no"), HunkDecision(1, "reject"),
                              HunkDecision(2, "reject", "not this")]) == "no; not this"
    assert rejection_message([HunkDecision(0, "reject")]) is None
    assert reviewable("a" * (1 << 20), "") and not reviewable("a" * ((1 << 20) + 1), "")
    assert not reviewable("", "é" * ((1 << 19) + 1))  # over 1 MiB as UTF-8
