"""Numbers and the log level from environment variables."""

import pytest

from heddle.envvars import log_level, number


def test_unset_or_empty_is_the_default():
    assert number({}, "X", 5) == 5
    assert number({"X": "  "}, "X", 5) == 5


def test_numbers():
    assert number({"X": "2.5"}, "X", 5) == 2.5
    assert number({"X": " 7 "}, "X", 5, whole=True) == 7


@pytest.mark.parametrize("raw, whole, minimum, message", [
    ("abc", False, 0, "X must be a number, not 'abc'"),
    ("2.5", True, 0, "X must be a whole number, not '2.5'"),
    ("-1", False, 0, "X must be a number of at least 0, not '-1'"),
    ("nan", False, 0.001, "X must be a number of at least 0.001, not 'nan'"),
])
def test_errors_name_the_variable(raw, whole, minimum, message):
    with pytest.raises(ValueError) as err:
        number({"X": raw}, "X", 5, whole=whole, minimum=minimum)
    assert str(err.value) == message


def test_log_levels():
    assert log_level({}) == "INFO"
    assert log_level({"HEDDLE_LOG_LEVEL": " debug "}) == "DEBUG"
    with pytest.raises(ValueError) as err:
        log_level({"HEDDLE_LOG_LEVEL": "LOUD"})
    assert str(err.value) == ("HEDDLE_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, "
                              "CRITICAL, not 'LOUD'")
