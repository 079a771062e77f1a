"""Numbers and the log level from environment variables."""

import pytest

from heddle.envvars import http_url, log_level, number


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


@pytest.mark.parametrize("raw", ["https://api.anthropic.com", "http://127.0.0.1:8080/proxy",
                                 "HTTP://Example.com"])
def test_http_urls(raw):
    assert http_url({"U": f" {raw} "}, "U") == raw


@pytest.mark.parametrize("raw", ["notaurl", "ftp://x", "http://", "http:///v1", "localhost:8080",
                                 "http://h:99999", "http://h:port"])
def test_what_is_no_http_url(raw):
    assert http_url({}, "U") is None and http_url({"U": ""}, "U") is None
    with pytest.raises(ValueError) as err:
        http_url({"U": raw}, "U")
    assert str(err.value) == f"U is not an http(s) URL: {raw!r}"
