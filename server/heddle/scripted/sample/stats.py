"""Small statistics helpers."""


def average(values):
    """The arithmetic mean of `values`."""
    return sum(values) / len(values)


def spread(values):
    """The difference between the largest and the smallest value."""
    return max(values) - min(values)
