"""Checks for stats.py: run with `python3 check_stats.py`."""

from stats import average

assert average([1, 2, 3]) == 2
assert average([]) == 0, "average of no values should be 0"
print("all checks passed")
