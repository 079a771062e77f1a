"""`python -m bench`: the benchmark suite (see bench/run.py and docs/performance.md)."""

from bench.run import main

raise SystemExit(main())
