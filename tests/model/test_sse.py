"""The SSE decoder and the event assembler on their own: bytes in, events out, no I/O."""

from __future__ import annotations

import msgspec
import pytest

from heddle.core.messages import TextBlock, ThinkingBlock, ToolUseBlock
from heddle.core.stream import BlockDone, BlockStarted, TextChunk, ThinkingChunk
from heddle.model.errors import StreamIncomplete, StreamUnreadable, classify
from heddle.model.sse import Assembler, SSEDecoder
from tests.model.rawserver import (block_start, block_stop, delta, events_bytes, message_end,
                                   message_start, text_answer, text_delta)

STREAM = (b": a comment\n"
          b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n"
          b"event: ping\ndata: {\"type\": \"ping\"}\n\n"
          b"id: 4\nretry: 100\nevent: content_block_delta\ndata: {\"a\":\ndata: 1}\n\n"
          b"data: no name\n\n"
          b"event:error\ndata:{\"x\": 1}\n\n"
          b"event: error\n\n"
          b"\n\n\n"
          b"event: dropped\ndata: cut off")
EXPECTED = [(b"message_start", b"{\"type\":\"message_start\"}"),
            (b"ping", b"{\"type\": \"ping\"}"),
            (b"content_block_delta", b"{\"a\":\n1}"),
            (b"", b"no name"),
            (b"error", b"{\"x\": 1}"),
            (b"error", b"")]


def feed_all(pieces: list[bytes]) -> list[tuple[bytes, bytes]]:
    d = SSEDecoder()
    return [ev for piece in pieces for ev in d.feed(piece)]


@pytest.mark.parametrize("nl", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_and_every_split_point(nl):
    stream = STREAM.replace(b"\n", nl)
    assert feed_all([stream]) == EXPECTED
    for i in range(len(stream) + 1):
        assert feed_all([stream[:i], stream[i:]]) == EXPECTED, i
    assert feed_all([stream[i:i + 1] for i in range(len(stream))]) == EXPECTED


def test_mixed_line_endings_and_a_crlf_split_between_reads():
    assert feed_all([b"event: a\r", b"\ndata: 1\r", b"\n\r", b"\n"]) == [(b"a", b"1")]
    assert feed_all([b"event: a\rdata: 1\n\r\n"]) == [(b"a", b"1")]
    # A CR that ends a read and an LF that starts the next are one line ending, not two.
    assert feed_all([b"data: 1\r", b"\ndata: 2\r\n\r\n"]) == [(b"", b"1\n2")]


def test_a_leading_byte_order_mark_is_skipped():
    assert feed_all([b"\xef\xbb", b"\xbfdata: 1\n\n"]) == [(b"", b"1")]


def test_nothing_is_held_back_once_an_event_is_complete():
    d = SSEDecoder()
    assert d.feed(b"data: 1\n\ndata: 2\n") == [(b"", b"1")]
    assert d.feed(b"\n") == [(b"", b"2")]


def pairs(events: list[dict]) -> list[tuple[bytes, bytes]]:
    return SSEDecoder().feed(events_bytes(events))


def test_text_deltas_of_one_read_become_one_chunk():
    done = []
    a = Assembler(done)
    out = a.feed(pairs(text_answer("Hel", "lo", " there")))
    assert out == [BlockStarted(0, "text"), TextChunk(0, "Hello there"),
                   BlockDone(0, TextBlock("Hello there"))]
    assert done == [TextBlock("Hello there")]
    end = a.end(3)
    assert end.stop_reason == "end_turn"
    assert (end.usage.input_tokens, end.usage.output_tokens, end.usage.model_calls) == (7, 11, 3)
    assert (end.usage.cache_read_input_tokens, end.usage.cache_creation_input_tokens) == (3, 2)


def test_reads_split_the_chunks_where_they_split_the_events():
    events = text_answer("a", "b", "c", "d")
    a = Assembler([])
    first = a.feed(pairs(events[:4]))
    second = a.feed(pairs(events[4:]))
    assert first == [BlockStarted(0, "text"), TextChunk(0, "ab")]
    assert second[0] == TextChunk(0, "cd")


def test_thinking_then_text_then_tool_use():
    events = [message_start(),
              block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
              delta(0, {"type": "thinking_delta", "thinking": "hm"}),
              delta(0, {"type": "thinking_delta", "thinking": "m"}),
              delta(0, {"type": "signature_delta", "signature": "sig"}),
              block_stop(0),
              block_start(1, {"type": "text", "text": ""}),
              text_delta(1, "Reading."), block_stop(1),
              block_start(2, {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}),
              delta(2, {"type": "input_json_delta", "partial_json": ""}),
              delta(2, {"type": "input_json_delta", "partial_json": "{\"path\": "}),
              delta(2, {"type": "input_json_delta", "partial_json": "\"a.py\"}"}),
              block_stop(2), *message_end("tool_use")]
    out = Assembler([]).feed(pairs(events))
    assert out == [
        BlockStarted(0, "thinking"), ThinkingChunk(0, "hmm"),
        BlockDone(0, ThinkingBlock("hmm", "sig")),
        BlockStarted(1, "text"), TextChunk(1, "Reading."), BlockDone(1, TextBlock("Reading.")),
        BlockStarted(2, "tool_use", "toolu_1", "Read"),
        BlockDone(2, ToolUseBlock("toolu_1", "Read", {"path": "a.py"}))]


def test_invalid_tool_input_is_reported_on_the_block():
    events = [message_start(),
              block_start(0, {"type": "tool_use", "id": "t", "name": "Read", "input": {}}),
              delta(0, {"type": "input_json_delta", "partial_json": "{\"path\": "}),
              block_stop(0), *message_end("tool_use")]
    done = Assembler([]).feed(pairs(events))[-1]
    assert done.block == ToolUseBlock("t", "Read", {}) and "invalid JSON" in done.input_error


def test_unknown_events_blocks_and_deltas_are_skipped():
    events = [message_start(),
              {"type": "future_event", "index": "not a number", "delta": [1, 2]},
              block_start(0, {"type": "text", "text": ""}),
              text_delta(0, "a"),
              delta(0, {"type": "citations_delta", "citation": {"cited_text": "x"}}),
              text_delta(0, "b"),
              block_stop(0),
              block_start(1, {"type": "server_tool_use", "id": "s", "name": "web_search"}),
              delta(1, {"type": "input_json_delta", "partial_json": "{}"}),
              block_stop(1),
              block_start(2, {"type": "text", "text": ""}),
              text_delta(2, "c"), block_stop(2),
              *message_end()]
    a = Assembler([])
    out = a.feed(pairs(events))
    assert out == [BlockStarted(0, "text"), TextChunk(0, "ab"), BlockDone(0, TextBlock("ab")),
                   BlockStarted(2, "text"), TextChunk(2, "c"), BlockDone(2, TextBlock("c"))]
    assert a.end(1).stop_reason == "end_turn"


@pytest.mark.parametrize("bad", [b'{"type": "content_block_stop", "index": "x"}',
                                 b'{"type": "content_block_stop", "index": 0'])
def test_a_known_event_that_cannot_be_read_fails_after_what_came_before(bad):
    done = []
    a = Assembler(done)
    out = a.feed(pairs(text_answer("a", "b")[:4]) + [(b"content_block_stop", bad)]
                 + pairs([text_delta(0, "never")]))
    assert out == [BlockStarted(0, "text"), TextChunk(0, "ab")]
    assert isinstance(a.failure, StreamUnreadable) and done == []
    assert classify(a.failure).code == "streamInterrupted" and classify(a.failure).retryable


def test_a_lone_lf_after_a_cr_read_does_not_eat_the_next_newline():
    body = b"event: a\r\ndata: 1\r\n\ndata: 2\n\n"
    assert feed_all([b"event: a\r", b"\n", b"data: 1\r", b"\n", b"\ndata: 2\n\n"]) == \
        SSEDecoder().feed(body) == [(b"a", b"1"), (b"", b"2")]


def test_error_event_stops_the_response_after_what_came_before():
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    a = Assembler([])
    out = a.feed(pairs(text_answer("a", "b")[:4]) + [(b"error", msgspec.json.encode(body))]
                 + pairs([text_delta(0, "never")]))
    assert out == [BlockStarted(0, "text"), TextChunk(0, "ab")]
    assert a.error.body == body and a.error.message == str(body)


def test_error_event_that_is_not_json():
    a = Assembler([])
    a.feed([(b"error", b"oops")])
    assert (a.error.body, a.error.message) == ("oops", "oops")
    a = Assembler([])
    a.feed([(b"error", b"")])
    assert a.error.message == "Error code: 200"


def test_no_message_stop_is_incomplete():
    a = Assembler([])
    a.feed(pairs(text_answer("a")[:-1]))
    with pytest.raises(StreamIncomplete):
        a.end(1)


def test_cache_usage_from_the_split_object_and_the_final_message_delta():
    start = message_start()
    start["message"]["usage"] = {"input_tokens": 5, "cache_read_input_tokens": 1000,
                                 "cache_creation": {"ephemeral_5m_input_tokens": 300,
                                                    "ephemeral_1h_input_tokens": 20}}
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
           "usage": {"input_tokens": 5, "cache_read_input_tokens": 1000,
                     "cache_creation_input_tokens": 320, "output_tokens": 9},
           "context_management": {"applied_edits": [
               {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3,
                "cleared_input_tokens": 4200}]}}
    events = [start, block_start(0, {"type": "text", "text": ""}), text_delta(0, "hi"),
              block_stop(0), end, {"type": "message_stop"}]
    a = Assembler([])
    a.feed(pairs(events))
    got = a.end(1)
    assert (got.usage.input_tokens, got.usage.cache_read_input_tokens,
            got.usage.cache_creation_input_tokens, got.usage.output_tokens) == (5, 1000, 320, 9)
    assert got.usage.prompt_tokens == 1325 and got.cleared_input_tokens == 4200
    a = Assembler([])
    a.feed(pairs([start, *events[1:4], {"type": "message_delta", "delta": {"stop_reason":
               "end_turn"}, "usage": {"output_tokens": 2}}, {"type": "message_stop"}]))
    assert a.end(1).usage.cache_creation_input_tokens == 320  # from the split object
