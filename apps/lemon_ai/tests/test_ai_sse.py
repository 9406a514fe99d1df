"""The SSE decoder: spec behaviour, and any chunking of a stream gives the same events."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_ai import ServerSentEvent, SSEDecoder, SSEError


def decode(chunks: list[bytes]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.close()


def test_fields_comments_and_multiline_data() -> None:
    stream = (
        b": a comment\n"
        b"event: content_block_delta\n"
        b"id: 7\n"
        b"retry: 1500\n"
        b"data: first line\n"
        b"data:second line\n"
        b"\n"
        b'data: {"x": 1}\n\n'
    )
    assert decode([stream]) == [
        ServerSentEvent(event="content_block_delta", data="first line\nsecond line", id="7",
                        retry=1500),
        ServerSentEvent(event="message", data='{"x": 1}', id="7"),
    ]  # fmt: skip


def test_all_line_endings_and_a_leading_bom() -> None:
    stream = "\ufeffdata: a\r\n\r\ndata: b\r\rdata: c\n\n".encode()
    assert [e.data for e in decode([stream])] == ["a", "b", "c"]


def test_event_without_data_is_not_dispatched_and_unterminated_event_is_dropped() -> None:
    assert decode([b"event: ping\n\n", b"data: tail-without-blank-line\n"]) == []


def test_a_line_over_the_bound_is_an_error() -> None:
    decoder = SSEDecoder(max_event_bytes=16)
    with pytest.raises(SSEError, match="larger than 16 characters"):
        decoder.feed(b"data: " + b"x" * 64)


def test_a_line_arriving_in_many_chunks_is_bounded_too() -> None:
    decoder = SSEDecoder(max_event_bytes=1024 * 1024)
    for _ in range(16):
        assert decoder.feed(b"x" * 65536) == []
    with pytest.raises(SSEError, match="larger than 1 MiB"):
        decoder.feed(b"x")


def test_an_event_of_many_data_lines_is_bounded() -> None:
    decoder = SSEDecoder(max_event_bytes=64)
    with pytest.raises(SSEError, match="larger than 64 characters"):
        decoder.feed(b"data: 0123456789\n" * 8)


def test_the_default_bound_accepts_events_far_over_4_mib() -> None:
    decoder = SSEDecoder()
    assert decoder.max_event_bytes == 64 * 1024 * 1024
    payload = b"y" * (5 * 1024 * 1024)
    events = decoder.feed(b"data: " + payload[: 1 << 20])
    for start in range(1 << 20, len(payload), 1 << 16):
        events += decoder.feed(payload[start : start + (1 << 16)])
    events += decoder.feed(b"\n\n")
    assert [len(e.data) for e in events] == [len(payload)]


def test_close_can_dispatch_an_event_that_lacks_its_blank_line() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: message_stop\ndata: {}\n") == []
    assert decoder.close(dispatch_unterminated=True) == [
        ServerSentEvent(event="message_stop", data="{}")
    ]
    decoder = SSEDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert [e.data for e in decoder.close(dispatch_unterminated=True)] == ["[DONE]"]


_field_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=20
)
_event = st.tuples(st.sampled_from(["", "message", "delta", "ü-event"]),
                   st.lists(_field_text, min_size=1, max_size=3))  # fmt: skip


@given(
    events=st.lists(_event, min_size=1, max_size=6),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    data=st.data(),
)
def test_any_split_of_the_byte_stream_gives_the_same_events(
    events: list[tuple[str, list[str]]], newline: str, data: st.DataObject
) -> None:
    text = ""
    for name, lines in events:
        if name:
            text += f"event: {name}{newline}"
        text += "".join(f"data: {line}{newline}" for line in lines)
        text += newline
    raw = text.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    whole = decode([raw])
    assert decode(chunks) == whole
    assert [e.data for e in whole] == ["\n".join(lines) for _, lines in events]
    assert [e.event for e in whole] == [name or "message" for name, _ in events]
