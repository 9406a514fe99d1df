"""Session keys: the canonical grammar, parsed into a typed record and formatted back.

Two canonical forms (colon separated)::

    agent:<agent_id>:main[:sub:<sub_id>]
    agent:<agent_id>:<channel_id>:<account_id>:<peer_kind>:<peer_id>[:thread:<thread_id>][:sub:<sub_id>]

``peer_kind`` is one of ``dm``, ``group``, ``channel``, ``main``, ``unknown``. The extras come as
key/value pairs, ``thread`` before ``sub``, each at most once. Every segment is 1..128 printable
characters without ``:`` or whitespace; a whole key is at most 512 characters.

Guarantee: for every text ``k`` that :meth:`SessionKey.parse` accepts,
``SessionKey.parse(k).format() == k``; everything else is rejected with
:class:`~lemon_core.sessions.InvalidSessionKeyError` whose ``reason`` says what is wrong.

The router also accepts *free-form* keys that do not start with ``agent:`` (for example a terminal
client's ``tui-20250101T000000``): they are used only for coordination and storage, have no
channel, and run on the request's agent. :func:`check_session_key` implements that acceptance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from lemon_core.sessions.errors import InvalidSessionKeyError

PeerKind = Literal["dm", "group", "channel", "main", "unknown"]
PEER_KINDS: frozenset[str] = frozenset(get_args(PeerKind))

MAX_SEGMENT_CHARS = 128
MAX_KEY_CHARS = 512
_PREFIX = "agent"


def _segment_problem(value: str) -> str | None:
    if not value:
        return "is empty"
    if len(value) > MAX_SEGMENT_CHARS:
        return f"is longer than {MAX_SEGMENT_CHARS} characters"
    if ":" in value:
        return "contains ':'"
    for ch in value:
        if ch.isspace() or not ch.isprintable():
            return f"contains a whitespace or control character ({ch!r})"
    return None


def _check_segment(key: str, name: str, value: str) -> None:
    problem = _segment_problem(value)
    if problem is not None:
        raise InvalidSessionKeyError(key, f"{name} {problem}")


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionKey:
    """A parsed canonical session key. Build with :meth:`main`, :meth:`channel` or :meth:`parse`."""

    agent_id: str
    kind: Literal["main", "channel"]
    channel_id: str | None = None
    account_id: str | None = None
    peer_kind: PeerKind | None = None
    peer_id: str | None = None
    thread_id: str | None = None
    sub_id: str | None = None

    def __post_init__(self) -> None:
        # Validate through format(): one place knows the grammar.
        text = self._render()
        if self.kind == "main":
            if any(
                v is not None
                for v in (
                    self.channel_id,
                    self.account_id,
                    self.peer_kind,
                    self.peer_id,
                    self.thread_id,
                )
            ):
                raise InvalidSessionKeyError(
                    text, "a main key has no channel, account, peer or thread"
                )
        else:
            for name in ("channel_id", "account_id", "peer_kind", "peer_id"):
                if getattr(self, name) is None:
                    raise InvalidSessionKeyError(text, f"a channel key needs {name}")
            if self.channel_id == "main":
                raise InvalidSessionKeyError(
                    text, "channel_id 'main' is reserved for the main form 'agent:<id>:main'"
                )
            if self.peer_kind not in PEER_KINDS:
                raise InvalidSessionKeyError(
                    text,
                    f"peer_kind {self.peer_kind!r} is not one of {', '.join(sorted(PEER_KINDS))}",
                )
        for name in (
            "agent_id",
            "channel_id",
            "account_id",
            "peer_id",
            "thread_id",
            "sub_id",
        ):
            value = getattr(self, name)
            if value is not None:
                _check_segment(text, name, value)
        if len(text) > MAX_KEY_CHARS:
            raise InvalidSessionKeyError(text, f"is longer than {MAX_KEY_CHARS} characters")

    @classmethod
    def main(cls, agent_id: str, *, sub_id: str | None = None) -> SessionKey:
        """The main key of an agent, ``agent:<agent_id>:main``."""
        return cls(agent_id=agent_id, kind="main", sub_id=sub_id)

    @classmethod
    def channel(
        cls,
        agent_id: str,
        *,
        channel_id: str,
        account_id: str,
        peer_kind: PeerKind,
        peer_id: str,
        thread_id: str | None = None,
        sub_id: str | None = None,
    ) -> SessionKey:
        """A channel key for one peer (optionally one thread) on one account of a channel."""
        return cls(
            agent_id=agent_id,
            kind="channel",
            channel_id=channel_id,
            account_id=account_id,
            peer_kind=peer_kind,
            peer_id=peer_id,
            thread_id=thread_id,
            sub_id=sub_id,
        )

    @classmethod
    def parse(cls, text: str) -> SessionKey:
        """Parse a canonical key; raise :class:`InvalidSessionKeyError` with the reason."""
        if not isinstance(text, str):
            raise InvalidSessionKeyError(repr(text), "a session key must be a string")
        if len(text) > MAX_KEY_CHARS:
            raise InvalidSessionKeyError(text, f"is longer than {MAX_KEY_CHARS} characters")
        parts = text.split(":")
        if parts[0] != _PREFIX:
            raise InvalidSessionKeyError(text, "must start with 'agent:'")
        if len(parts) < 3:
            raise InvalidSessionKeyError(
                text, "is too short: 'agent:<agent_id>' must be followed by 'main' or a channel"
            )
        agent_id = parts[1]
        _check_segment(text, "agent_id", agent_id)
        if parts[2] == "main":
            extras = cls._parse_extras(text, parts[3:], allowed=("sub",))
            return cls(agent_id=agent_id, kind="main", sub_id=extras.get("sub"))
        if len(parts) < 6:
            raise InvalidSessionKeyError(
                text,
                "a channel key needs channel, account, peer_kind and peer_id "
                f"(got {len(parts) - 2} of 4 segments after the agent id)",
            )
        channel_id, account_id, peer_kind, peer_id = parts[2:6]
        _check_segment(text, "channel_id", channel_id)
        _check_segment(text, "account_id", account_id)
        if peer_kind not in PEER_KINDS:
            raise InvalidSessionKeyError(
                text,
                f"peer_kind {peer_kind!r} is not one of {', '.join(sorted(PEER_KINDS))}",
            )
        _check_segment(text, "peer_id", peer_id)
        extras = cls._parse_extras(text, parts[6:], allowed=("thread", "sub"))
        return cls.channel(
            agent_id,
            channel_id=channel_id,
            account_id=account_id,
            peer_kind=peer_kind,  # type: ignore[arg-type]  # checked against PEER_KINDS above
            peer_id=peer_id,
            thread_id=extras.get("thread"),
            sub_id=extras.get("sub"),
        )

    @staticmethod
    def _parse_extras(text: str, rest: list[str], *, allowed: tuple[str, ...]) -> dict[str, str]:
        if len(rest) % 2:
            forms = " or ".join(f"'{a}:<id>'" for a in allowed)
            raise InvalidSessionKeyError(
                text,
                f"extra segments must come as key/value pairs ({forms}); "
                f"got a dangling {rest[-1]!r}",
            )
        extras: dict[str, str] = {}
        last_index = -1
        for i in range(0, len(rest), 2):
            name, value = rest[i], rest[i + 1]
            if name not in allowed:
                raise InvalidSessionKeyError(
                    text, f"unknown extra {name!r}; allowed here: {', '.join(allowed)}"
                )
            if name in extras:
                raise InvalidSessionKeyError(text, f"extra {name!r} appears more than once")
            index = allowed.index(name)
            if index < last_index:
                raise InvalidSessionKeyError(
                    text, f"extras must be in the order {', '.join(allowed)}"
                )
            last_index = index
            _check_segment(text, f"{name} id", value)
            extras[name] = value
        return extras

    def _render(self) -> str:
        if self.kind == "main":
            parts = [_PREFIX, self.agent_id, "main"]
        else:
            parts = [
                _PREFIX,
                self.agent_id,
                str(self.channel_id),
                str(self.account_id),
                str(self.peer_kind),
                str(self.peer_id),
            ]
            if self.thread_id is not None:
                parts += ["thread", self.thread_id]
        if self.sub_id is not None:
            parts += ["sub", self.sub_id]
        return ":".join(parts)

    def format(self) -> str:
        """The canonical text of this key."""
        return self._render()

    def __str__(self) -> str:
        return self._render()


def check_session_key(text: str) -> SessionKey | None:
    """Validate a session key as the router accepts it.

    Returns the parsed :class:`SessionKey` for a canonical key, ``None`` for an acceptable
    free-form key (one that does not start with ``agent:``), and raises
    :class:`InvalidSessionKeyError` otherwise: a key starting with ``agent:`` must be canonical.
    """
    if not isinstance(text, str):
        raise InvalidSessionKeyError(repr(text), "a session key must be a string")
    if text.startswith(_PREFIX + ":") or text == _PREFIX:
        return SessionKey.parse(text)
    if not text:
        raise InvalidSessionKeyError(text, "is empty")
    if len(text) > MAX_KEY_CHARS:
        raise InvalidSessionKeyError(text, f"is longer than {MAX_KEY_CHARS} characters")
    for ch in text:
        if ch.isspace() or not ch.isprintable():
            raise InvalidSessionKeyError(
                text, f"contains a whitespace or control character ({ch!r})"
            )
    return None
