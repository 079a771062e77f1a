"""Prints a summary of the day's response times."""

from stats import average, spread

TIMES_MS = [120, 95, 143, 101]


def summary(times):
    return f"avg {average(times):.1f} ms, spread {spread(times)} ms"


if __name__ == "__main__":
    print(summary(TIMES_MS))
    print(summary([]))
