"""The frame grammar of the wire: requests parsed strictly, responses and events encoded.

Incoming frames are JSON text objects ``{"type":"req","id":..,"method":..,"params"?:{..}}``,
nested at most :data:`MAX_DEPTH` levels. Nesting is counted before decoding, so a deep frame
never reaches the recursive decoder: 1,000 levels would raise ``RecursionError`` there, and a few
hundred would later, in any encoder or store that walks the value. Anything else is refused with
a :class:`~lemon_control_plane.WireError` whose ``request_id`` is ``"unknown"`` when the frame
had no usable id (the client drops those). Outgoing frames are encoded with msgspec; an event's
payload is encoded once per broadcast and spliced into each connection's frame with that
connection's ``seq``."""

from __future__ import annotations

import itertools
import operator
import re
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from lemon_control_plane.errors import WireError

__all__ = [
    "MAX_DEPTH",
    "FrameError",
    "Request",
    "encode",
    "encode_event",
    "error_frame",
    "ok_frame",
    "parse_request",
    "too_deep",
]

UNKNOWN_ID: Final = "unknown"
_MAX_ID_CHARS: Final = 256
_MAX_METHOD_CHARS: Final = 128
#: The deepest nesting of arrays and objects a frame may have (the frame object itself is 1).
MAX_DEPTH: Final = 64
_decoder: Final = msgspec.json.Decoder()
# A JSON string, or an unterminated one up to the end (so the pattern never fails once it saw a
# quote: a failing match retried from every later quote would be quadratic), and any run of
# bytes that are not brackets.
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.?[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NOT_BRACKET: Final = re.compile(rb"[^\[\]{}]+")
_STEP: Final = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_encoder: Final = msgspec.json.Encoder()


class FrameError(WireError):
    """A frame refused before dispatch; ``request_id`` is what the error ``res`` echoes."""

    def __init__(self, request_id: str, error: WireError) -> None:
        super().__init__(error.code, error.message, error.details)
        self.request_id = request_id


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """One parsed ``req`` frame (``params`` is ``{}`` when the frame had none)."""

    id: str
    method: str
    params: dict[str, Any]


def too_deep(text: str | bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``text`` nests arrays and objects deeper than ``limit`` (brackets inside JSON
    strings do not count). Linear and at C speed (a 1 MB frame of brackets takes about 50 ms):
    a frame with at most ``limit`` opening brackets is answered by two counts; else strings and
    everything that is not a bracket are removed, and the deepest point is the maximum of the
    running sum of +1 per opening and -1 per closing bracket."""
    if isinstance(text, str):
        if text.count("[") + text.count("{") <= limit:
            return False
        raw = text.encode("utf-8", "surrogatepass")
    else:
        if text.count(b"[") + text.count(b"{") <= limit:
            return False
        raw = text
    steps = _NOT_BRACKET.sub(b"", _STRING.sub(b"", raw)).translate(_STEP)
    # steps[i] is 2 for an opening bracket and 0 for a closing one: depth after i+1 brackets
    # is (the sum of the first i+1 steps) - (i+1).
    depths = map(operator.sub, itertools.accumulate(steps), range(1, len(steps) + 1))
    return max(depths, default=0) > limit


def parse_request(text: str | bytes) -> Request:
    """Parse a request frame or raise :class:`FrameError` (never anything else)."""
    if too_deep(text):
        raise FrameError(
            UNKNOWN_ID,
            WireError("INVALID_REQUEST", f"frame nested deeper than {MAX_DEPTH} levels"),
        )
    try:
        frame = _decoder.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise FrameError(UNKNOWN_ID, WireError("INVALID_REQUEST", f"Invalid JSON: {exc}")) from None
    except RecursionError:  # cannot happen below MAX_DEPTH; kept as the last fence
        raise FrameError(
            UNKNOWN_ID, WireError("INVALID_REQUEST", "frame nested too deeply")
        ) from None
    if not isinstance(frame, dict):
        raise FrameError(UNKNOWN_ID, WireError("INVALID_REQUEST", "a frame must be a JSON object"))
    kind = frame.get("type")
    if kind != "req":
        raise FrameError(
            UNKNOWN_ID,
            WireError("INVALID_REQUEST", f"expected request frame, got: {_short(kind)}"),
        )
    rid, method = frame.get("id"), frame.get("method")
    if not isinstance(rid, str) or not rid or len(rid) > _MAX_ID_CHARS:
        raise FrameError(
            UNKNOWN_ID, WireError("INVALID_REQUEST", "request frame must have id and method")
        )
    if not isinstance(method, str) or not method or len(method) > _MAX_METHOD_CHARS:
        raise FrameError(rid, WireError("INVALID_REQUEST", "request frame must have id and method"))
    params = frame.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise FrameError(rid, WireError("INVALID_REQUEST", "params must be a JSON object"))
    return Request(id=rid, method=method, params=params)


def _short(value: object) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 64 else text[:61] + "..."


def encode(value: object) -> bytes:
    """JSON bytes of a wire value (plain dicts, lists, strings, numbers, None)."""
    return _encoder.encode(value)


def ok_frame(request_id: str, payload: object) -> str:
    """A successful ``res`` frame (the ``payload`` key is always written)."""
    return encode({"type": "res", "id": request_id, "ok": True, "payload": payload}).decode()


def error_frame(request_id: str, error: WireError) -> str:
    """A failed ``res`` frame with the error body ``{code, message, details?}``."""
    return encode({"type": "res", "id": request_id, "ok": False, "error": error.body()}).decode()


def encode_event(
    name_json: bytes, seq: int, payload_json: bytes, state_json: bytes | None = None
) -> str:
    """An ``event`` frame from its pre-encoded name and payload and this connection's seq
    (and, when given, the pre-encoded ``stateVersion`` map)."""
    state = b"" if state_json is None else b',"stateVersion":' + state_json
    return (
        b'{"type":"event","event":'
        + name_json
        + b',"seq":'
        + str(seq).encode()
        + b',"payload":'
        + payload_json
        + state
        + b"}"
    ).decode()
