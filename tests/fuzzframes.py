"""Random and adversarial byte streams for the stdio reader, from a seed (so any failure can be
replayed): mutated valid frames, random header lines, truncated frames, huge, negative and
non-numeric Content-Lengths, NULs, CR-only line endings, invalid UTF-8, deep nesting, JSON
that is not an object, batches, over-long lines and plain noise.

The messages inside are harmless to a running daemon (no `initialize`, `shutdown` or `exit`,
no turn), so whatever a stream does, a probe sent after it must be answered.
"""

from __future__ import annotations

import json
import random

CORPUS = [
    {"jsonrpc": "2.0", "id": 11, "method": "session/list", "params": {}},
    {"jsonrpc": "2.0", "id": "x", "method": "session/new", "params": {"workspace": "/nonexistent/ws"}},
    {"jsonrpc": "2.0", "id": 12, "method": "session/load", "params": {"sessionId": "nope"}},
    {"jsonrpc": "2.0", "id": 13, "method": "rules/list", "params": {"sessionId": "nope"}},
    {"jsonrpc": "2.0", "id": 14, "method": "nope/nothing", "params": [1, 2]},
    {"jsonrpc": "2.0", "method": "turn/cancel", "params": {"sessionId": "nope"}},
    {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 99}},
    {"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}},
    {"jsonrpc": "2.0", "id": "late", "result": {"decision": "allowOnce"}},
    {"jsonrpc": "2.0", "id": 15, "error": {"code": -32601, "message": "no"}},
]

NOT_OBJECTS = [b"5", b'"text"', b"null", b"true", b"[]", b"[1,2,3]", b"{}", b'""', b"-0.5e3",
               b'[{"jsonrpc":"2.0","id":21,"method":"session/list","params":{}},'
               b'{"jsonrpc":"2.0","method":"$/setTrace","params":{"value":"off"}}]']

BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80"]

BAD_LENGTHS = [b"-5", b"-0", b"abc", b"", b" ", b"1e3", b"0x10", b"+7", b"1_0", b"\xd9\xa3",
               b"99999999999999999999999999", b"100000000000000000000", b"67108865",
               b"4" * 5000, b"12 34", b"7\x00", b"0"]


def frame(body: bytes, name: bytes = b"Content-Length", eol: bytes = b"\r\n") -> bytes:
    return name + b": %d" % len(body) + eol + eol + body


def encode(message: object) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def nested(rng: random.Random) -> bytes:
    depth = rng.choice([63, 64, 65, 200, 999, 1000, 1001, 5000, 50_000])
    if rng.random() < 0.5:
        inner = b"[" * depth + b"]" * depth
    else:
        inner = b'{"a":' * depth + b"1" + b"}" * depth
    if rng.random() < 0.3:
        inner = inner[:rng.randrange(len(inner))]  # unbalanced
    if rng.random() < 0.5:
        return b'{"jsonrpc":"2.0","id":31,"method":"session/list","params":{"x":%s}}' % inner
    return inner


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        at = rng.randrange(len(out) + 1)
        if op < 0.35 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif op < 0.6:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif op < 0.8 and out:
            del out[at:at + rng.randint(1, 8)]
        else:
            out[at:at] = rng.choice([b"\r\n", b"\n", b"\r", b"\x00", b":", b"\r\n\r\n",
                                     b"Content-Length: ", b"{", b"]"])
    return bytes(out)


def piece(rng: random.Random) -> bytes:
    kind = rng.randrange(17)
    body = encode(rng.choice(CORPUS))
    if kind == 0:  # a valid frame
        return frame(body, name=rng.choice([b"Content-Length", b"content-length", b"CONTENT-LENGTH"]))
    if kind == 1:  # a mutated valid frame
        return mutate(rng, frame(body))
    if kind == 2:  # random header lines around a frame
        lines = [rng.choice([b"Content-Type: application/vscode-jsonrpc; charset=utf-8",
                             b"X-Junk: " + bytes(rng.randrange(32, 127) for _ in range(20)),
                             b"not a header", b": no name", b"Bad Name: x", b"\x00\x00: \x00",
                             bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))])
                 for _ in range(rng.randint(1, 4))]
        head = b"\r\n".join(lines) + b"\r\n"
        return head + frame(body) if rng.random() < 0.5 else head + b"\r\n" + body
    if kind == 3:  # a truncated frame: the header promises more than follows
        full = frame(body)
        return full[:rng.randrange(1, len(full))]
    if kind == 4:  # a Content-Length that is huge, negative or not a number
        return b"Content-Length: " + rng.choice(BAD_LENGTHS) + b"\r\n\r\n" + body
    if kind == 5:  # NULs anywhere
        out = bytearray(frame(body))
        for _ in range(rng.randint(1, 5)):
            out.insert(rng.randrange(len(out) + 1), 0)
        return bytes(out)
    if kind == 6:  # CR-only line endings
        return frame(body, eol=b"\r")
    if kind == 7:  # invalid UTF-8 inside a string
        cut = body.index(b'"', 2)
        return frame(body[:cut] + rng.choice(BAD_UTF8) + body[cut:])
    if kind == 8:
        return frame(nested(rng))
    if kind == 9:  # valid JSON that is not a JSON-RPC object, batches
        return frame(rng.choice(NOT_OBJECTS))
    if kind == 10:  # noise
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    if kind == 11:  # a header line longer than any the reader takes
        return b"X-Long: " + b"y" * rng.choice([8190, 8191, 8192, 9000, 20000]) + \
            rng.choice([b"", b"Content-Length: 3"]) + b"\r\n"
    if kind == 12:  # a Content-Length shorter or longer than the body
        return b"Content-Length: %d\r\n\r\n" % max(0, len(body) + rng.randint(-20, 20)) + body
    if kind == 13:  # a header block with no Content-Length, then an unframed body
        return b"Content-Type: x\r\n\r\n" + body
    if kind == 14:  # a declared body far larger than what follows, within or over the limit
        return b"Content-Length: %d\r\n\r\n" % rng.choice([5000, 10 ** 6, 64 * 2 ** 20,
                                                         64 * 2 ** 20 + 1, 10 ** 12]) + body
    if kind == 15:  # an empty body, blank lines, several Content-Lengths
        return rng.choice([b"Content-Length: 0\r\n\r\n", b"\r\n\r\n\n\n",
                           b"Content-Length: 3\r\nContent-Length: %d\r\n\r\n" % len(body) + body])
    return mutate(rng, frame(rng.choice(NOT_OBJECTS + [nested(rng)])))


def stream(seed: int, pieces: int = 6) -> bytes:
    """One adversarial byte stream; the same seed gives the same bytes."""
    rng = random.Random(seed)
    return b"".join(piece(rng) for _ in range(rng.randint(1, pieces)))


def probe_bytes(message: dict) -> bytes:
    """A well-formed message on a line of its own: what must be read after any stream."""
    return b"\r\n" + frame(encode(message))
