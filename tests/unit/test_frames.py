"""The one framer (`heddle.frames`), fed directly: frames in pieces of any size, bounds, and the
clean errors a client gets from `messages` (the daemon's tolerant use is tested over a real
pipe in test_framing.py)."""

from __future__ import annotations

import pytest

from heddle.frames import MAX_HEADER_LINE, Decoder, FrameError, Refused, encode

BODIES = [b'{"jsonrpc":"2.0","id":1,"result":null}', b"[]", b"", b'"x\\ny"', b"7" * 70_000]
STREAM = b"".join(encode(body) for body in BODIES)


def test_encode_frames_a_body():
    assert encode(b'{"a":1}') == b'Content-Length: 7\r\n\r\n{"a":1}'


@pytest.mark.parametrize("size", [1, 2, 7, 64, 4096, len(STREAM)])
def test_the_bodies_come_out_whatever_the_pieces(size):
    frames = Decoder()
    got = []
    for at in range(0, len(STREAM), size):
        got += list(frames.messages(STREAM[at:at + size]))
    assert got == BODIES
    assert list(frames.messages(b"")) == [] and frames.finished


def test_a_frame_is_given_only_once_it_is_complete():
    frames = Decoder()
    whole = encode(b'{"a":1}')
    assert list(frames.messages(whole[:-1])) == []
    assert list(frames.messages(whole[-1:] + whole[:3])) == [b'{"a":1}']


@pytest.mark.parametrize("data, reason", [
    (b"Content-Length: x\r\n\r\n{}", "invalid Content-Length"),
    (b"Content-Type: json\r\n\r\n{}", "without a Content-Length"),
    (b"Content-Length: 100000000\r\n\r\n{}", "larger than the limit"),
    (b"garbage\r\n" + encode(b"{}"), "not a message: b'garbage"),
])
def test_a_client_gets_a_clear_error_for_what_is_not_a_frame(data, reason):
    with pytest.raises(FrameError, match=reason):
        list(Decoder().messages(data))


def test_a_client_gets_the_messages_before_what_is_not_one_then_the_error():
    messages = Decoder().messages(encode(b"[1]") + b"oops\r\n" + encode(b"[2]"))
    assert next(messages) == b"[1]"
    with pytest.raises(FrameError, match="oops"):
        next(messages)


def test_a_client_is_told_when_the_input_ends_inside_a_message():
    frames = Decoder()
    assert list(frames.messages(b"Content-Length: 10\r\n\r\n{")) == []
    with pytest.raises(FrameError, match="ended inside a message"):
        list(frames.messages(b""))


def test_the_tolerant_reader_answers_and_reads_on():
    class Notes:
        def __init__(self):
            self.said = []

        def skipped(self, data):
            self.said.append(("skipped", data))

        def refused(self, why):
            self.said.append(("refused", why))

    notes = Notes()
    frames = Decoder(notes)
    items = list(frames.feed(b"noise\r\nContent-Length: -1\r\n\r\n{}" + encode(b"[1]")))
    assert [type(i) for i in items] == [Refused, bytes] and items[1] == b"[1]"
    assert notes.said == [("skipped", b"noise\r\n"), ("refused", items[0].reason),
                          ("skipped", b"{}Content-Length: 3\r\n")]  # read on from the header


def test_a_body_over_the_bound_is_dropped_as_it_arrives_not_held():
    frames = Decoder(max_body=1000)
    with pytest.raises(FrameError, match="1000000 bytes is larger than the limit"):
        list(frames.messages(b"Content-Length: 1000000\r\n\r\n"))
    frames = Decoder(notes=None, max_body=1000)
    list(frames.feed(b"Content-Length: 1000000\r\n\r\n"))
    for _ in range(100):
        assert list(frames.feed(b"x" * 10_000)) == []
        assert frames.buffered < 100  # dropped, not kept
    assert list(frames.feed(encode(b"{}"))) == [b"{}"]


def test_a_header_line_is_read_in_bounded_pieces():
    frames = Decoder(notes=None)
    items = list(frames.feed(b"X" * (10 * MAX_HEADER_LINE) + b"\r\n" + encode(b"{}")))
    assert items == [b"{}"]
    assert frames.buffered == 0
