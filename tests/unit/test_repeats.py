"""The repeat guard's pure functions: the same call, key order, cycles, what breaks a run, the
limits and their settings."""

from __future__ import annotations

from pathlib import Path

from heddle.loop.repeats import (GO_ON, Loop, Outcome, RepeatLimits, Repeats, Seen, after,
                                 after_response, before, call_key,
                                 refusal, refused, reset, result_digest, warning)
from heddle.settings import LoopSettings, merge, parse_settings

SAME = result_digest("same", False)


def run(calls, limits: RepeatLimits = RepeatLimits()):
    """Feed (tool, input, result) calls; returns what the guard said of each: `refuse`,
    `warn N` or `ok`, and its state after them."""
    repeats, said = Repeats(limits), []
    for tool, inp, result, *edited in calls:
        key = call_key(tool, inp)
        found = before(repeats, tool, key)
        if found is not None:
            said.append(f"refuse {found.count}")
            repeats = refused(repeats, found)
            continue
        repeats, warned = after(repeats, tool, key, result_digest(result, False), bool(edited))
        said.append(f"warn {warned.count}" if warned else "ok")
    return said, repeats


def grep(pattern="x"):
    return ("Grep", {"pattern": pattern}, "no matches")


def test_the_same_call_is_warned_at_the_third_and_refused_from_the_fourth():
    said, _ = run([grep()] * 6)
    assert said == ["ok", "ok", "warn 3", "refuse 4", "refuse 5", "refuse 6"]


def test_key_order_and_json_whitespace_do_not_make_a_different_call():
    a = ("Read", {"path": "/w/app.py", "offset": 1}, "text")
    b = ("Read", {"offset": 1, "path": "/w/app.py"}, "text")
    assert call_key(*a[:2]) == call_key(*b[:2])
    assert run([a, b, a, b])[0] == ["ok", "ok", "warn 3", "refuse 4"]
    assert call_key("Read", {"path": "a"}) != call_key("Read", {"path": "b"})
    assert call_key("Read", {"path": "a"}) != call_key("Grep", {"path": "a"})


def test_a_cycle_of_two_is_caught():
    a, b = grep("a"), ("Read", {"path": "/w/x"}, "x")
    said, _ = run([a, b] * 4)
    assert said == ["ok"] * 5 + ["warn 3", "refuse 4", "refuse 4"]


def test_a_cycle_of_three_is_caught_and_named_in_call_order():
    calls = [grep("a"), ("Read", {"path": "/w/x"}, "x"), ("Bash", {"command": "ls"}, "x")]
    repeats, said = Repeats(RepeatLimits()), []
    for tool, inp, result in calls * 3:
        repeats, warned = after(repeats, tool, call_key(tool, inp),
                                result_digest(result, False), False)
        said.append(warned)
    assert said[:8] == [None] * 8
    assert said[8] == Loop(("Grep", "Read", "Bash"), 3)
    assert before(repeats, "Grep", call_key("Grep", {"pattern": "a"})) == \
        Loop(("Grep", "Read", "Bash"), 4)
    assert before(repeats, "Read", call_key("Read", {"path": "/w/x"})) is None


def test_a_cycle_longer_than_four_is_not_looked_for():
    calls = [grep(str(n)) for n in range(5)]
    assert "refuse 4" not in run(calls * 4)[0]


def test_a_different_result_breaks_the_run():
    said, _ = run([grep(), grep(), ("Grep", {"pattern": "x"}, "1 match"), grep(), grep()])
    assert said == ["ok"] * 5
    # the run that counts is the one with the same result: two more make it three
    assert run([("Grep", {"pattern": "x"}, "1 match"), grep(), grep(), grep()])[0] == \
        ["ok", "ok", "ok", "warn 3"]


def test_a_successful_edit_in_between_starts_the_count_again():
    tests = ("Bash", {"command": "pytest"}, "1 failed")
    edit = ("Edit", {"path": "/w/a.py", "old_string": "a", "new_string": "b"}, "ok", True)
    said, _ = run([tests, tests, edit] * 4)
    assert said == ["ok"] * 12
    # an edit that is not a successful one (no `edited`) starts nothing again
    failed_edit = edit[:3]
    assert run([tests, tests, failed_edit] * 4)[0][-3:] == ["refuse 4"] * 3


def test_the_same_edit_repeated_is_a_loop_too():
    edit = ("Write", {"path": "/w/a.py", "content": "x"}, "wrote 1 line", True)
    assert run([edit] * 4)[0] == ["ok", "ok", "warn 3", "refuse 4"]


def test_reset_starts_counting_again():
    _, repeats = run([grep()] * 3)
    assert before(repeats, "Grep", call_key("Grep", {"pattern": "x"})) == Loop(("Grep",), 4)
    fresh = reset(repeats)
    assert fresh == Repeats(repeats.limits)
    assert before(fresh, "Grep", call_key("Grep", {"pattern": "x"})) is None


def test_thresholds_come_from_the_limits():
    assert run([grep()] * 6, RepeatLimits(warn_at=2, stop_at=5))[0] == \
        ["ok", "warn 2", "warn 3", "warn 4", "refuse 5", "refuse 6"]
    assert run([grep()] * 6, RepeatLimits(warn_at=0, stop_at=3))[0] == \
        ["ok", "ok", "refuse 3", "refuse 4", "refuse 5", "refuse 6"]
    assert run([grep()] * 5, RepeatLimits(warn_at=3, stop_at=0))[0] == \
        ["ok", "ok", "warn 3", "warn 4", "warn 5"]


def test_zero_for_both_turns_the_guard_off():
    said, repeats = run([grep()] * 10, RepeatLimits(0, 0))
    assert said == ["ok"] * 10 and repeats.seen == ()


def test_only_the_longest_run_looked_for_is_kept():
    _, repeats = run([grep(str(n)) for n in range(50)])
    assert len(repeats.seen) == 4 * 4


def test_what_the_model_is_told():
    one, cycle = Loop(("Bash",), 3), Loop(("Grep", "Read"), 4)
    assert "this same Bash call 3 times" in warning(one, RepeatLimits())
    assert "From the 4th time it will not run" in warning(one, RepeatLimits())
    assert "From the" not in warning(one, RepeatLimits(3, 0))
    assert refusal(cycle).startswith("This call did not run: it would have been the 4th time "
                                     "you made the same 2 calls (Grep → Read)")
    assert "change approach" in GO_ON


def settings(text: str) -> tuple[LoopSettings, list[str]]:
    warnings: list[str] = []
    return parse_settings(text.encode(), Path("/s.toml"), warnings).loop, warnings


def test_loop_settings_and_their_errors():
    assert settings("[loop]\nwarn_at = 5\nstop_at = 0\n") == (LoopSettings(5, 0), [])
    assert RepeatLimits.from_settings(LoopSettings(5, 0)) == RepeatLimits(5, 0)
    assert RepeatLimits.from_settings(LoopSettings(stop_at=6)) == RepeatLimits(3, 6)
    assert RepeatLimits.from_settings(None) == RepeatLimits(3, 4)
    loop, problems = settings("[loop]\nwarn_at = -1\nstop_at = 'x'\n")
    assert loop == LoopSettings()
    assert problems == ["/s.toml: loop.warn_at: Expected `int` >= 0 (ignored)",
                        "/s.toml: loop.stop_at: Expected `int | null`, got `str` (ignored)"]
    loop, problems = settings("[loop]\nwarn_at = 1\nstop_at = 3\n")
    assert loop == LoopSettings(None, 3)
    assert problems == ["/s.toml: loop.warn_at: 1 would count every call as a repetition; "
                        "use 0 (off) or 2 or more (ignored)"]
    assert settings("[loop]\nwarn_at = 4\nstop_at = 4\n")[1] == [
        "/s.toml: loop.warn_at (4) is not below loop.stop_at (4): the model is refused "
        "before it is ever warned"]
    assert settings("[loop]\nstop_at = 200\n")[1] == [
        "/s.toml: loop.stop_at: Expected `int` <= 100 (ignored)"]
    assert settings("[loop]\nwarn = 3\n")[1] == ["/s.toml: loop.warn: unknown setting (ignored)"]


def test_project_loop_settings_over_the_users():
    user, _ = settings("[loop]\nwarn_at = 5\nstop_at = 8\n")
    project, _ = settings("[loop]\nstop_at = 0\n")
    from heddle.settings import Settings
    assert merge(Settings(loop=user), Settings(loop=project)).loop == LoopSettings(5, 0)


def test_the_calls_of_one_response_count_once_each_in_request_order():
    grep = Outcome("Grep", call_key("Grep", {"pattern": "x"}), SAME, False)
    read = Outcome("Read", call_key("Read", {"path": "a"}), SAME, False)
    start = Repeats(RepeatLimits())
    # twenty-five of the same call in one response: the model saw none of their results
    once = after_response(start, [grep] * 25)
    assert once.seen == (Seen("Grep", grep.key, SAME),)
    # three responses of one call each make a run; a fourth response's call would extend it
    three = after_response(after_response(once, [grep]), [grep, grep])
    assert before(three, "Grep", grep.key) == Loop(("Grep",), 4)
    # a cycle inside one response is kept in order
    assert [s.tool for s in after_response(start, [grep, read, grep, read]).seen] == \
        ["Grep", "Read", "Grep", "Read"]
    # a refused call counts as made once more
    refused_once = after_response(three, [Loop(("Grep",), 4)])
    assert before(refused_once, "Grep", grep.key) == Loop(("Grep",), 5)
