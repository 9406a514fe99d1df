"""The web tools' card on the wire (``detail.web``): known fields with their types only, and a
thumbnail only when it is a PNG data URL (never page or model text)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lemon_control_plane.bridge import web_card

PNG_URL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhg"
    "GAWjR9awAAAABJRU5ErkJggg=="
)


def test_the_fetch_card_keeps_url_status_size_time_and_flag_rules() -> None:
    card = web_card({
        "url": "https://example.org/a", "final_url": "https://example.org/b", "status": 200,
        "bytes": 2048, "elapsed_s": 0.25, "cached": False, "flagged": True,
        "flags": [{"rule": "prompt_injection", "line": 3, "excerpt": "<img onerror=x>"}],
        "redirects": ["x"], "unknown": {"nested": 1},
    })  # fmt: skip
    assert card == {
        "url": "https://example.org/a", "final_url": "https://example.org/b", "status": 200,
        "bytes": 2048, "elapsed_s": 0.25, "cached": False, "flagged": True,
        "flags": ["prompt_injection"],
    }  # fmt: skip


def test_a_thumbnail_passes_only_as_a_png_data_url() -> None:
    shot = {"action": "screenshot", "url": "https://example.org/", "thumbnail": PNG_URL,
            "screenshot": {"bytes": 5000, "width": 1280, "height": 720, "x": "<b>"}}  # fmt: skip
    card = web_card(shot)
    assert card is not None
    assert card["thumbnail"] == PNG_URL
    assert card["screenshot"] == {"bytes": 5000, "width": 1280, "height": 720}
    for bad in (
        "javascript:alert(1)",
        "data:text/html;base64,PHNjcmlwdD4=",
        "data:image/svg+xml;base64,PHN2Zz4=",
        PNG_URL + '" onerror="alert(1)',
        "<img src=x onerror=alert(1)>",
        "data:image/png;base64," + "A" * 200_000,  # over the bound
    ):
        assert "thumbnail" not in (web_card({**shot, "thumbnail": bad}) or {})


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=50))


@given(st.dictionaries(st.sampled_from(["url", "status", "bytes", "cached", "x"]) | st.text(),
                       _VALUES))  # fmt: skip
def test_any_mapping_becomes_known_fields_of_their_types(raw: dict[str, object]) -> None:
    card = web_card(raw)
    assert card is not None
    assert set(card) <= set(raw)
    for name, value in card.items():
        assert value == raw[name] or value != value  # NaN is kept as it came
    assert web_card("not a mapping") is None
