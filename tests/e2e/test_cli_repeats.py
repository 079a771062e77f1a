"""`heddle ask` and the repeat guard: the notice printed; on a terminal the user is asked and
may let the turn go on; without one (and with -y) the turn ends, exit 1."""

from __future__ import annotations

from e2e.test_cli import Terminal, assert_clean, heddle
from e2e.test_repeats import GONE_ON, done, same_grep_four_times

NOTICE = "⟳ repeating itself: the agent made the same Grep call 4 times in a row with the " \
         "same result"


def test_ask_without_a_terminal_prints_the_notice_and_ends_the_turn(daemon_env, scripted,
                                                                    workspace):
    for n, (flags, why) in enumerate((([], "no terminal to ask on"), (["-y"], "-y"))):
        scripted.add_scenario(f"loop{n}", same_grep_four_times(done()))
        result = heddle(["ask", "-w", str(workspace), "-m", f"loop{n}", *flags, "find it"],
                        daemon_env)
        assert result.returncode == 1, result.stderr
        assert NOTICE in result.stdout
        assert f"stopping the turn ({why}): Heddle is repeating itself" in result.stdout
        assert "[loopDetected · 4 model calls" in result.stderr
        assert result.stderr.rstrip().endswith(
            "heddle: the agent made the same Grep call 4 times in a row with the same result; "
            "the turn was stopped")


def test_ask_on_a_terminal_asks_and_the_turn_goes_on(daemon_env, scripted, workspace):
    scripted.add_scenario("loop", same_grep_four_times(done("Changed approach.",
                                                            match=GONE_ON)))
    term = Terminal(["ask", "-w", str(workspace), "-m", "loop", "find it"], daemon_env)
    try:
        term.expect(b"[y] let it go on  [n] stop the turn > ", timeout=90)
        term.type(b"y\n")
        code = term.wait(timeout=90)
    finally:
        term.close()
    assert code == 0, term.text()
    assert NOTICE in term.text() and "Changed approach." in term.text()
    assert "? Heddle is repeating itself" in term.text()
    assert "[completed · 5 model calls" in term.text()
    assert_clean(term)


def test_ask_on_a_terminal_the_user_stops_the_turn(daemon_env, scripted, workspace):
    scripted.add_scenario("loop", same_grep_four_times())
    term = Terminal(["ask", "-w", str(workspace), "-m", "loop", "find it"], daemon_env)
    try:
        term.expect(b"[n] stop the turn > ", timeout=90)
        term.type(b"n\n")
        code = term.wait(timeout=90)
    finally:
        term.close()
    assert code == 1, term.text()
    assert "[loopDetected · 4 model calls" in term.text()
    assert "the turn was stopped" in term.text()
    assert_clean(term)
