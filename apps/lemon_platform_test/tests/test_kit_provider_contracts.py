"""Every lemon_ai provider passes the provider contract kit."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from lemon_ai import (
    AnthropicMessagesProvider,
    OfflineProvider,
    OpenAICompletionsProvider,
    RetryPolicy,
    default_catalogue,
    offline_model,
)
from lemon_platform_test.providers import ProviderContract, ProviderHarness, ScriptedProviderServer


def _retry(sleeps: list[float]) -> RetryPolicy:
    async def record(delay: float) -> None:
        sleeps.append(delay)

    return RetryPolicy(max_attempts=3, sleep=record, random=lambda: 0.0)


class TestOpenAICompletionsContract(ProviderContract):
    @pytest.fixture
    async def provider_harness(
        self, scripted_provider: ScriptedProviderServer
    ) -> AsyncIterator[ProviderHarness]:
        sleeps: list[float] = []
        provider = OpenAICompletionsProvider(api_key="sk-test", retry=_retry(sleeps))
        model = default_catalogue().resolve(
            "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
        )
        yield ProviderHarness(
            provider=provider, model=model, server=scripted_provider, retry_sleeps=sleeps
        )
        await provider.aclose()


class TestAnthropicMessagesContract(ProviderContract):
    @pytest.fixture
    async def provider_harness(
        self, scripted_provider: ScriptedProviderServer
    ) -> AsyncIterator[ProviderHarness]:
        sleeps: list[float] = []
        provider = AnthropicMessagesProvider(api_key="sk-ant-test", retry=_retry(sleeps))
        model = default_catalogue().resolve(
            "anthropic:claude-sonnet-4-20250514", base_url=scripted_provider.url
        )
        yield ProviderHarness(
            provider=provider, model=model, server=scripted_provider, retry_sleeps=sleeps
        )
        await provider.aclose()


class TestOfflineContract(ProviderContract):
    @pytest.fixture
    def provider_harness(self) -> ProviderHarness:
        return ProviderHarness(provider=OfflineProvider(), model=offline_model())
