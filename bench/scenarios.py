"""What the benchmarks ask the scripted model to do, and the workspace they do it in."""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Sizes:
    reps: int = 5
    warm_turns: int = 10
    text_chars: int = 1_200
    parallel_reads: int = 10
    sequential_reads: int = 30
    stream_chars: int = 200_000
    stream_deltas: int = 5_000
    idle_sessions: int = 50
    flood_chars: int = 480_000
    """Kept well inside a 200K-token context window: the turn must not compact."""
    flood_deltas: int = 12_000
    slow_rate: int = 250_000
    """Bytes per second the slow client reads once it reads again."""
    stall_probes: int = 5
    """Turns of other sessions timed with and without the stalled editor."""
    paced_deltas: int = 1_000
    paced_interval_ms: float = 2.0
    cache_iterations: int = 300
    """Tool rounds of the long session whose prompt caching `bench.cache` measures."""
    fresh_daemons: bool = True
    """A fresh daemon per group and repetition (peak RSS per scenario); off: one for all."""

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


FULL = Sizes()
QUICK = Sizes(reps=1, warm_turns=3, parallel_reads=3, sequential_reads=4, stream_chars=20_000,
              stream_deltas=500, idle_sessions=5, flood_chars=90_000, flood_deltas=2_250,
              slow_rate=2_000_000, stall_probes=2, paced_deltas=100, cache_iterations=60,
              fresh_daemons=False)

MODULE = '''"""Module {n}: helpers for the sample project."""


def add_{n}(a, b):
    """Add two numbers."""
    return a + b


def scale_{n}(values, factor):
    """Multiply every value by factor."""
    return [v * factor for v in values]


class Counter{n}:
    """Counts things."""

    def __init__(self):
        self.count = 0

    def bump(self, by=1):
        self.count += by
        return self.count
'''

APP = "def greet(name):\n    return 'Hello, ' + name\n\n\nprint(greet('world'))\n"


def make_workspace(root: Path, files: int) -> Path:
    """A small project: app.py and src/mod_NN.py files of about 400 bytes each."""
    if root.exists():
        shutil.rmtree(root)
    (root / "src").mkdir(parents=True)
    (root / "app.py").write_text(APP)
    for n in range(files):
        (root / "src" / f"mod_{n:02d}.py").write_text(MODULE.format(n=n) * 5)
    return root


def prose(chars: int) -> str:
    """Deterministic ASCII text of exactly `chars` characters, with line breaks."""
    words = ("the daemon streams each token to the editor as soon as it can while tools run "
             "and the model keeps writing ").split()
    out: list[str] = []
    size = 0
    i = 0
    while size < chars:
        w = words[i % len(words)] + ("\n" if i % 13 == 12 else " ")
        out.append(w)
        size += len(w)
        i += 1
    return "".join(out)[:chars]


def text(s: str, chunk: int = 16) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": s}], "chunk": chunk}


HELLO = {"repeat": True, "steps": [text("Hello from the scripted model.")]}


def single_text(sizes: Sizes) -> dict[str, Any]:
    return {"repeat": True, "steps": [text(prose(sizes.text_chars))]}


def parallel_tools(sizes: Sizes) -> tuple[dict[str, Any], list[list[str]]]:
    """Ten parallel reads, a grep and an edit in one response, then the answer."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": "Let me look at the code."}]
    ids = []
    for n in range(sizes.parallel_reads):
        ids.append(f"toolu_read_{n}")
        blocks.append({"type": "tool_use", "id": ids[-1], "name": "Read",
                       "input": {"path": f"src/mod_{n:02d}.py"}})
    ids.append("toolu_grep")
    blocks.append({"type": "tool_use", "id": "toolu_grep", "name": "Grep",
                   "input": {"pattern": "def add_", "path": "src"}})
    ids.append("toolu_edit")
    blocks.append({"type": "tool_use", "id": "toolu_edit", "name": "Edit",
                   "input": {"path": "app.py", "old_string": "return 'Hello, ' + name",
                             "new_string": "return f'Hello, {name}'"}})
    steps = [{"content": blocks}, text("Done: greet uses an f-string now. " + prose(300))]
    return {"steps": steps}, [ids, []]


def sequential_reads(sizes: Sizes) -> tuple[dict[str, Any], list[list[str]]]:
    """Thirty responses that each read one file, then the answer."""
    steps, ids = [], []
    for n in range(sizes.sequential_reads):
        ids.append([f"toolu_seq_{n}"])
        steps.append({"content": [
            {"type": "text", "text": f"Reading module {n}."},
            {"type": "tool_use", "id": ids[-1][0], "name": "Read",
             "input": {"path": f"src/mod_{n % 30:02d}.py"}}]})
    steps.append(text("All modules read. " + prose(300)))
    ids.append([])
    return {"steps": steps}, ids


def stream(chars: int, deltas: int) -> dict[str, Any]:
    chunk = max(1, -(-chars // deltas))
    return {"repeat": True, "steps": [text(prose(chars), chunk)]}


FLOOD_CALL_CHARS = 30_000
"""Text per model call of the flood: under the 32,768 characters an 8,192-token call may send."""


def flood(chars: int, deltas: int, tail_s: float = 0.0) -> dict[str, Any]:
    """`chars` of text in tiny deltas over model calls that each also read a file, then (with
    `tail_s`) a short last answer streamed slowly over about that many seconds."""
    calls = max(1, -(-chars // FLOOD_CALL_CHARS))
    per_call = chars // calls
    chunk = max(1, -(-chars // deltas))
    steps = []
    for n in range(calls):
        step = text(prose(per_call), chunk)
        step["content"].append({"type": "tool_use", "name": "Read",
                                "input": {"path": f"src/mod_{n % 30:02d}.py", "limit": 5}})
        steps.append(step)
    tail = text(prose(400), 8)
    tail["delayMs"] = tail_s * 1000 / 55
    steps.append(tail)
    return {"repeat": True, "steps": steps}


def paced(deltas: int, interval_ms: float) -> dict[str, Any]:
    """`deltas` text deltas of 8 characters, `interval_ms` apart (a fast real model)."""
    step = text(prose(deltas * 8), 8)
    step["delayMs"] = interval_ms
    return {"repeat": True, "steps": [step]}
