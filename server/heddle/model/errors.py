"""Classify whatever a model call raised into one stable ErrorInfo."""

from __future__ import annotations

import os
import re
import socket

from heddle.core.events import ErrorInfo

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


_UNKNOWN_MODEL = re.compile(r"model: (\S.*)")
"""What Anthropic's API (and the scripted server) answers, 404 `not_found_error`, for a model
it does not serve: the bare `model: NAME`."""


def is_prompt_too_long(message: str) -> bool:
    return "prompt is too long" in message.lower()


def unknown_model(status: int, message: str) -> ErrorInfo | None:
    """The endpoint's answer to a model it does not serve, said so that it can be acted on;
    None for any other answer."""
    named = _UNKNOWN_MODEL.fullmatch(message.strip())
    if status != 404 or named is None:
        return None
    return ErrorInfo("unknownModel", f"the model endpoint does not know the model "
                     f"{named[1]!r} (it answered 404 \"{message.strip()}\"): choose a model it "
                     "serves", status, False)


def classify(exc: BaseException) -> ErrorInfo:
    """Map an SDK or transport exception to an ErrorInfo (code, message, status, retryable)."""
    import anthropic
    import httpx2

    if isinstance(exc, anthropic.APIStatusError):
        message = exc.api_message or str(exc)
        status = exc.status_code
        if is_prompt_too_long(message):
            return ErrorInfo("promptTooLong", message, status, False)
        if (unknown := unknown_model(status, message)) is not None:
            return unknown
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
        return ErrorInfo("connection", connection_message(exc), None, True)
    if isinstance(exc, (httpx2.TransportError, StreamIncomplete, StreamUnreadable)):
        return ErrorInfo("streamInterrupted", f"the model's response stream broke off: {exc}",
                         None, True)
    return ErrorInfo("internal", f"{type(exc).__name__}: {exc}", None, False)


def connection_message(exc: BaseException) -> str:
    """`cannot connect to http://127.0.0.1:9 (connection refused)`: the endpoint and the
    operating system's reason, whichever HTTP client raised it (aiohttp's own text names an
    `ssl:default` context even for plain http)."""
    import httpx2

    request = getattr(exc, "request", None)
    url = getattr(request, "url", None)
    where = "the model endpoint"
    if url is not None and url.host:
        where = f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")
    chain = _causes(exc)
    os_error = next((e for e in reversed(chain) if isinstance(e, OSError)
                     and isinstance(e.errno, int)), None)
    if isinstance(os_error, socket.gaierror):  # the resolver's own text ("name or service ...")
        reason = str(os_error.strerror).lower()
    elif os_error is not None and os_error.errno > 0:
        reason = os.strerror(os_error.errno).lower()
    else:
        reason = str(chain[-1]) or type(chain[-1]).__name__
    connecting = any(isinstance(e, httpx2.ConnectError) for e in chain)
    return f"cannot connect to {where} ({reason})" if connecting \
        else f"lost the connection to {where} ({reason})"


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what caused it, outermost first (bounded: a chain can loop)."""
    chain = [exc]
    while len(chain) < 20 and (nxt := chain[-1].__cause__ or chain[-1].__context__) is not None:
        chain.append(nxt)
    return chain


class StreamIncomplete(Exception):
    """The response ended without `message_stop`."""


class StreamUnreadable(Exception):
    """An event of a type this client reads could not be decoded: the stream is corrupt."""
