"""Heddle's benchmark suite: the real daemon over real stdio against the scripted model.

Run `python -m bench` (add `--quick` for a smoke run); docs/performance.md explains the numbers.
"""
