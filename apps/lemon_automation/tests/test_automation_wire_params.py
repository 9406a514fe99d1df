"""The wire methods' parameter readers: whatever JSON a client sends for a parameter, the
answer is its value (or the default), or a UsageError naming it; never another exception (an
explicit null once reached ``int(None)`` in ``cron.runs``: INTERNAL_ERROR on the wire)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lemon_automation._wire import _bool, _id, _int, _str
from lemon_core.errors import UsageError

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


def _outcome(read: Any) -> Any:
    try:
        return read()
    except UsageError as exc:
        return exc


@given(value=_json)
def test_a_number_parameter_is_a_finite_number_or_a_usage_error(value: Any) -> None:
    got = _outcome(lambda: _int({"limit": value}, "limit", default=50, low=1))
    if not isinstance(got, UsageError):
        assert int(got) >= 1  # what the handlers do with it
        if value is None:
            assert got == 50


@given(value=_json)
def test_text_flag_and_id_parameters_are_their_type_or_a_usage_error(value: Any) -> None:
    text = _outcome(lambda: _str({"name": value}, "name", default="d"))
    assert isinstance(text, str | UsageError)
    flag = _outcome(lambda: _bool({"on": value}, "on", default=True))
    assert isinstance(flag, bool | UsageError)
    job = _outcome(lambda: _id({"id": value, "jobId": "j1"}))
    assert isinstance(job, str | UsageError)
    if value is None:
        assert (text, flag, job) == ("d", True, "j1")
