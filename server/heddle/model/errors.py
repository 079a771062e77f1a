"""Classify whatever a model call raised into one stable ErrorInfo."""

from __future__ import annotations

from heddle.loop.events import ErrorInfo

_BY_TYPE = {
    "overloaded_error": ("overloaded", True),
    "rate_limit_error": ("rateLimited", True),
    "api_error": ("serverError", True),
    "request_too_large": ("promptTooLong", False),
    "authentication_error": ("authentication", False),
    "permission_error": ("permission", False),
    "not_found_error": ("notFound", False),
    "invalid_request_error": ("invalidRequest", False),
}

_BY_STATUS = {
    401: ("authentication", False), 403: ("permission", False), 404: ("notFound", False),
    408: ("timeout", True), 409: ("serverError", True), 413: ("promptTooLong", False),
    429: ("rateLimited", True), 529: ("overloaded", True),
}


def is_prompt_too_long(message: str) -> bool:
    return "prompt is too long" in message.lower()


def classify(exc: BaseException) -> ErrorInfo:
    """Map an SDK or transport exception to an ErrorInfo (code, message, status, retryable)."""
    import anthropic
    import httpx2

    if isinstance(exc, anthropic.APIStatusError):
        message = exc.api_message or str(exc)
        status = exc.status_code
        if is_prompt_too_long(message):
            return ErrorInfo("promptTooLong", message, status, False)
        if status == 200 or exc.type in _BY_TYPE and status not in _BY_STATUS:
            # An `error` event inside a 200 stream: only the error type tells what happened.
            code, retryable = _BY_TYPE.get(exc.type or "", ("serverError", True))
        elif status in _BY_STATUS:
            code, retryable = _BY_STATUS[status]
        elif status >= 500:
            code, retryable = "serverError", True
        else:
            code, retryable = "invalidRequest", False
        return ErrorInfo(code, message, None if status == 200 else status, retryable)
    if isinstance(exc, (anthropic.APITimeoutError, httpx2.TimeoutException)):
        return ErrorInfo("timeout", f"the model endpoint timed out ({type(exc).__name__})",
                         None, True)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc
        return ErrorInfo("connection", f"cannot reach the model endpoint: {cause}", None, True)
    if isinstance(exc, (httpx2.TransportError, StreamIncomplete, StreamUnreadable)):
        return ErrorInfo("streamInterrupted", f"the model's response stream broke off: {exc}",
                         None, True)
    return ErrorInfo("internal", f"{type(exc).__name__}: {exc}", None, False)


class StreamIncomplete(Exception):
    """The response ended without `message_stop`."""


class StreamUnreadable(Exception):
    """An event of a type this client reads could not be decoded: the stream is corrupt."""
