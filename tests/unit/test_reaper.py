"""The reaper process: what it kills when the daemon's end of its pipe closes, and what not."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from heddle.processes.reaper import MARK, Reaper
from procs import alive, wait_dead

TREE = "sleep 300 & echo $! > {dir}/child.pid; wait"


@pytest.fixture
def spawned():
    """Shell trees started by a test, killed and released afterwards whatever happened."""
    procs: list[subprocess.Popen] = []

    def spawn(tmp: Path, env: dict[str, str]) -> list[int]:
        proc = subprocess.Popen(["/bin/bash", "-c", TREE.format(dir=tmp)], env=env,
                                start_new_session=True)
        procs.append(proc)
        deadline = time.monotonic() + 10
        while not (tmp / "child.pid").exists() or not (tmp / "child.pid").read_text().strip():
            assert time.monotonic() < deadline, "the tree never started"
            time.sleep(0.01)
        child = int((tmp / "child.pid").read_text())
        (tmp / "child.pid").unlink()
        return [proc.pid, child]

    yield spawn
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != MARK}


def test_a_marked_tree_dies_even_if_it_was_never_registered(tmp_path, spawned):
    reaper = Reaper()
    reaper.start()
    pids = spawned(tmp_path, reaper.env(plain_env()))  # the daemon died before watch()
    reaper.close()
    assert wait_dead(pids, time.monotonic() + 10) == []


def test_a_registered_group_dies_without_the_mark(tmp_path, spawned):
    reaper = Reaper()
    pids = spawned(tmp_path, plain_env())
    reaper.watch(pids[0])
    reaper.close()
    assert wait_dead(pids, time.monotonic() + 10) == []


def test_a_forgotten_group_is_left_alone(tmp_path, spawned):
    reaper = Reaper()
    pids = spawned(tmp_path, plain_env())
    reaper.watch(pids[0])
    reaper.forget(pids[0])
    reaper_pid = reaper.pid
    reaper.close()
    assert wait_dead([reaper_pid], time.monotonic() + 10) == []
    assert all(alive(p) for p in pids)


def test_another_daemons_mark_is_not_ours(tmp_path, spawned):
    ours, theirs = Reaper(), Reaper()
    ours.start()
    pids = spawned(tmp_path, theirs.env(plain_env()))
    ours.close()
    assert all(alive(p) for p in pids)


def test_a_reaper_that_was_killed_is_replaced_with_every_live_group(tmp_path, spawned):
    reaper = Reaper()
    first = spawned(tmp_path, plain_env())
    reaper.watch(first[0])
    old = reaper.pid
    os.kill(old, signal.SIGKILL)
    assert wait_dead([old], time.monotonic() + 10) == []
    second = spawned(tmp_path, plain_env())
    reaper.watch(second[0])  # finds the old one gone, starts another and tells it both groups
    assert reaper.pid not in (None, old)
    reaper.close()
    assert wait_dead(first + second, time.monotonic() + 10) == []
