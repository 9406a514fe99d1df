"""The model catalogue and cost accounting."""

from __future__ import annotations

import pytest

from lemon_ai import (
    AnthropicMessagesProvider,
    Cost,
    OfflineProvider,
    UnknownModelError,
    Usage,
    api_key_variable,
    default_catalogue,
    offline_model,
    provider_for,
)


def test_hosted_models_carry_window_and_prices() -> None:
    model = default_catalogue().resolve("anthropic:claude-sonnet-4-20250514")
    assert model.api == "anthropic_messages"
    assert model.context_window == 200_000
    assert (model.input_price, model.output_price) == (3.0, 15.0)


def test_local_servers_resolve_any_model_id_through_their_template() -> None:
    model = default_catalogue().resolve("ollama:llama3.2")
    assert model.api == "openai_completions"
    assert model.base_url == "http://127.0.0.1:11434/v1"
    assert model.cost(Usage(input_tokens=10**6, output_tokens=10**6)).total == 0.0


def test_base_url_override() -> None:
    model = default_catalogue().resolve("openai:gpt-4o", base_url="http://127.0.0.1:9/v1")
    assert model.base_url == "http://127.0.0.1:9/v1"
    assert model.context_window == 128_000


@pytest.mark.parametrize("ref", ["gpt-4o", ":gpt-4o", "openai:"])
def test_malformed_references_explain_the_form(ref: str) -> None:
    with pytest.raises(UnknownModelError, match="provider:model_id"):
        default_catalogue().resolve(ref)


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(UnknownModelError, match=r"known providers: .*ollama"):
        default_catalogue().resolve("nosuch:model")


def test_cost_uses_per_million_prices_for_each_token_class() -> None:
    model = default_catalogue().resolve("anthropic:claude-sonnet-4-20250514")
    usage = Usage(input_tokens=1000, output_tokens=2000, cache_read_tokens=10_000,
                  cache_write_tokens=4000)  # fmt: skip
    cost = model.cost(usage)
    assert cost == Cost(input=0.003, output=0.03, cache_read=0.003, cache_write=0.015)
    assert cost.total == pytest.approx(0.051)
    assert (usage + usage).total_tokens == 2 * usage.total_tokens
    assert usage.prompt_tokens == 15_000


async def test_provider_for_picks_the_wire_and_the_key_variable() -> None:
    assert api_key_variable("openai") == "OPENAI_API_KEY"
    model = default_catalogue().resolve("anthropic:claude-3-5-haiku-20241022")
    provider = provider_for(model, environ={"ANTHROPIC_API_KEY": "sk-ant"})
    assert isinstance(provider, AnthropicMessagesProvider)
    await provider.aclose()
    assert isinstance(provider_for(offline_model(), environ={}), OfflineProvider)


async def test_a_hosted_model_without_its_key_is_refused_before_connecting() -> None:
    from lemon_ai import AuthError

    hosted = default_catalogue().resolve("openai:gpt-4o-mini")
    assert hosted.requires_key
    with pytest.raises(AuthError, match="OPENAI_API_KEY is not set"):
        provider_for(hosted, environ={})
    with pytest.raises(AuthError, match="MY_KEY is not set"):
        provider_for(hosted, environ={}, key_variable="MY_KEY")
    provider = provider_for(hosted, environ={"OPENAI_API_KEY": "sk"})
    await provider.aclose()
    local = default_catalogue().resolve("ollama:llama3.2")
    assert not local.requires_key  # a local server needs none
    provider = provider_for(local, environ={})
    await provider.aclose()
