"""The benchmark suite runs in its quickest mode and reports every metric (not their values)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_quick_run_produces_every_metric(tmp_path):
    sys.path.insert(0, str(ROOT))
    try:
        from bench.run import METRICS
    finally:
        sys.path.remove(str(ROOT))
    out = tmp_path / "bench.json"
    run = subprocess.run([sys.executable, "-m", "bench", "--quick", "--json", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=840)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    doc = json.loads(out.read_text())
    assert doc["suite"] == "heddle-bench"
    missing = [name for name in METRICS if name not in doc["metrics"]]
    assert missing == []
    for name, metric in doc["metrics"].items():
        assert {"median", "min", "max", "n", "unit"} <= set(metric), name
    assert doc["checks"] and all(doc["checks"].values()), doc["checks"]
    assert "| metric | median | min | max |" in run.stdout


@pytest.mark.timeout(300)
def test_the_briefing_bench_splits_the_first_request_by_section():
    run = subprocess.run([sys.executable, "-m", "bench.briefing", "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    sizes = doc["bytes"]
    assert all(sizes[s] > 0 for s in ("system", "environment", "instructions", "tools",
                                      "prompt")), sizes
    assert sizes["request"] > sum(sizes[s] for s in ("system", "environment", "instructions",
                                                     "prompt"))
    assert [Path(p).name for p in doc["instruction_files"]] == [
        "AGENTS.md", "AGENTS.md", "style.md", "CLAUDE.md"]
