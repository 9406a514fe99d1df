"""The address guard: public addresses pass; every class of internal address is refused, by
literal and after DNS resolution; allow_hosts lifts it for exact hosts only."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_browser import AddressGuard, FetchFailed, FetchRefused, address_refusal


class StubResolver:
    """Answers fixed addresses per name (a resolver stands behind the Resolver Protocol)."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host not in self.answers:
            raise OSError(f"no such host {host}")
        return self.answers[host]


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.10.10", "link-local"),
        ("fe80::1", "link-local"),
        ("100.64.0.1", "CGNAT"),
        ("100.127.255.254", "CGNAT"),
        ("224.0.0.251", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("64:ff9b::a00:1", "private"),
        ("2002:7f00:1::", "loopback"),
        ("192.0.2.1", "private"),
        ("240.0.0.1", "private"),
    ],
)
def test_internal_addresses_are_refused_with_their_class(address: str, why: str) -> None:
    reason = address_refusal(address)
    assert reason is not None
    assert why in reason


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(address) is None


@given(st.ip_addresses())
def test_no_address_passes_unless_global_and_not_multicast(ip: object) -> None:
    import ipaddress

    parsed = ipaddress.ip_address(str(ip))
    if address_refusal(str(parsed)) is None:
        assert parsed.is_global
        assert not parsed.is_multicast


async def test_a_name_resolving_to_loopback_is_refused() -> None:
    guard = AddressGuard(resolver=StubResolver({"evil.example": ["127.0.0.1"]}))
    with pytest.raises(FetchRefused, match=r"evil\.example \(127\.0\.0\.1\) is a loopback") as err:
        await guard.check("http://evil.example/")
    assert err.value.reason == "address"
    assert "allow_hosts" in str(err.value)


async def test_a_name_with_one_private_answer_among_public_ones_is_refused() -> None:
    guard = AddressGuard(resolver=StubResolver({"mixed.example": ["1.1.1.1", "10.0.0.5"]}))
    with pytest.raises(FetchRefused, match="private"):
        await guard.check("https://mixed.example/")


@pytest.mark.parametrize(
    "url",
    ["http://metadata.google.internal/computeMetadata/v1/",
     "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/"],
)  # fmt: skip
async def test_metadata_is_refused_even_when_allowed(url: str) -> None:
    guard = AddressGuard(
        allow_hosts=["metadata.google.internal", "169.254.169.254", "[fd00:ec2::254]"],
        resolver=StubResolver({"metadata.google.internal": ["169.254.169.254"]}),
    )
    with pytest.raises(FetchRefused, match="metadata"):
        await guard.check(url)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x", "gopher://x/"])
async def test_other_schemes_are_refused(url: str) -> None:
    with pytest.raises(FetchRefused, match="only http and https") as err:
        await AddressGuard().check(url)
    assert err.value.reason == "scheme"


async def test_allow_hosts_is_exact_host_and_port() -> None:
    resolver = StubResolver({"localhost": ["127.0.0.1"]})
    guard = AddressGuard(allow_hosts=["127.0.0.1:8080", "[::1]:9000"], resolver=resolver)
    target = await guard.check("http://127.0.0.1:8080/x")
    assert (target.address, target.allowed_by_config) == ("127.0.0.1", True)
    assert (await guard.check("http://[::1]:9000/")).address == "::1"
    with pytest.raises(FetchRefused):
        await guard.check("http://127.0.0.1:8081/x")  # another port
    with pytest.raises(FetchRefused):
        await guard.check("http://localhost:8080/x")  # another name for the same address


async def test_an_unknown_name_is_a_failure_not_a_refusal() -> None:
    with pytest.raises(FetchFailed, match=r"could not resolve nowhere\.example"):
        await AddressGuard(resolver=StubResolver({})).check("http://nowhere.example/")
