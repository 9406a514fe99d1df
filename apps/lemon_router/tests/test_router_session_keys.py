from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_router import InvalidSessionKeyError, SessionKey, check_session_key

segment = st.text(
    alphabet=st.characters(
        blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters=":"
    ),
    min_size=1,
    max_size=20,
).filter(lambda s: all(c.isprintable() and not c.isspace() for c in s))

peer_kind = st.sampled_from(["dm", "group", "channel", "main", "unknown"])


@st.composite
def valid_keys(draw: st.DrawFn) -> str:
    agent = draw(segment)
    if draw(st.booleans()):
        parts = ["agent", agent, "main"]
    else:
        channel = draw(segment.filter(lambda s: s != "main"))
        parts = ["agent", agent, channel, draw(segment), draw(peer_kind), draw(segment)]
        if draw(st.booleans()):
            parts += ["thread", draw(segment)]
    if draw(st.booleans()):
        parts += ["sub", draw(segment)]
    return ":".join(parts)


@given(valid_keys())
def test_format_of_parse_is_identity_for_valid_keys(key: str) -> None:
    parsed = SessionKey.parse(key)
    assert parsed.format() == key
    assert str(parsed) == key
    assert check_session_key(key) == parsed


def test_examples_parse_into_fields() -> None:
    dm = SessionKey.parse("agent:default:telegram:default:dm:123456789")
    assert (dm.kind, dm.agent_id, dm.channel_id, dm.account_id) == (
        "channel",
        "default",
        "telegram",
        "default",
    )
    assert (dm.peer_kind, dm.peer_id, dm.thread_id, dm.sub_id) == ("dm", "123456789", None, None)
    web = SessionKey.parse("agent:default:web:browser:unknown:tab-abc")
    assert web.peer_id == "tab-abc"
    cron = SessionKey.parse("agent:abc:main:sub:cron_123")
    assert (cron.kind, cron.agent_id, cron.sub_id) == ("main", "abc", "cron_123")
    topic = SessionKey.parse("agent:a:telegram:bot:group:-100:thread:7:sub:x")
    assert (topic.thread_id, topic.sub_id, topic.peer_id) == ("7", "x", "-100")


def test_builders_produce_canonical_text() -> None:
    assert SessionKey.main("a").format() == "agent:a:main"
    key = SessionKey.channel(
        "a", channel_id="discord", account_id="b", peer_kind="channel", peer_id="9", thread_id="t"
    )
    assert key.format() == "agent:a:discord:b:channel:9:thread:t"


@pytest.mark.parametrize(
    ("key", "reason_part"),
    [
        ("agent", "too short"),
        ("agent:x", "too short"),
        ("agents:x:main", "must start with 'agent:'"),
        ("agent::main", "agent_id is empty"),
        ("agent:x:main:extra", "dangling 'extra'"),
        ("agent:x:main:thread:1", "unknown extra 'thread'"),
        ("agent:x:main:sub:1:sub:2", "more than once"),
        ("agent:x:telegram:acc:dm", "needs channel, account, peer_kind and peer_id"),
        ("agent:x:telegram:acc:friend:1", "peer_kind 'friend' is not one of"),
        ("agent:x:telegram::dm:1", "account_id is empty"),
        ("agent:x:telegram:acc:dm:1:7", "dangling '7'"),
        ("agent:x:telegram:acc:dm:1:topic:7", "unknown extra 'topic'"),
        ("agent:x:telegram:acc:dm:1:sub:a:thread:b", "in the order thread, sub"),
        ("agent:x:telegram:acc:dm:1:thread:", "thread id is empty"),
        ("agent:x y:main", "whitespace"),
        ("agent:x:main:sub:" + "s" * 200, "longer than 128"),
    ],
)
def test_invalid_keys_are_rejected_with_a_reason(key: str, reason_part: str) -> None:
    with pytest.raises(InvalidSessionKeyError) as info:
        SessionKey.parse(key)
    assert reason_part in info.value.reason
    assert info.value.key == key
    assert "expected 'agent:<agent_id>:main'" in str(info.value)


@given(valid_keys(), st.sampled_from(["", ":", "::", ": ", ":thread", ":sub:"]))
def test_valid_keys_with_garbage_appended_are_rejected(key: str, suffix: str) -> None:
    if not suffix:
        return
    with pytest.raises(InvalidSessionKeyError):
        SessionKey.parse(key + suffix)


def test_builder_validates_like_the_parser() -> None:
    with pytest.raises(InvalidSessionKeyError, match="reserved for the main form"):
        SessionKey.channel("a", channel_id="main", account_id="b", peer_kind="dm", peer_id="1")
    with pytest.raises(InvalidSessionKeyError, match="contains ':'"):
        SessionKey.main("a:b")


def test_free_form_keys_are_accepted_but_agent_prefixed_ones_must_be_canonical() -> None:
    assert check_session_key("tui-20250101T000000") is None
    with pytest.raises(InvalidSessionKeyError, match="too short"):
        check_session_key("agent:x")
    with pytest.raises(InvalidSessionKeyError, match="is empty"):
        check_session_key("")
    with pytest.raises(InvalidSessionKeyError, match="whitespace"):
        check_session_key("tui 1")


@given(
    st.lists(
        st.sampled_from(["agent", "a", "main", "sub", "thread", "dm", "tg", "", " ", "x:y", "7"]),
        max_size=10,
    ).map(":".join)
)
def test_any_text_either_round_trips_or_is_rejected_with_a_reason(text: str) -> None:
    error: InvalidSessionKeyError | None = None
    try:
        key = SessionKey.parse(text)
    except InvalidSessionKeyError as exc:
        error = exc
    if error is None:
        assert key.format() == text
    else:
        assert error.reason
        assert error.key == text
