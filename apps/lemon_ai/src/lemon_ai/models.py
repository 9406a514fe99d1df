"""Models and the model catalogue: wire protocol, base URL, context window and prices.

Models are named ``"provider:model_id"`` (``openai:gpt-4o-mini``, ``ollama:llama3.2``). The
built-in catalogue lists well-known hosted models with their context windows and published
per-million-token prices (dollars; check the provider's price page, prices change). For providers
that serve arbitrary local models (Ollama, vLLM, llama.cpp server, LM Studio) any model id
resolves against the provider's template, with zero prices and a conservative context window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from lemon_ai.errors import UnknownModelError
from lemon_ai.usage import Cost, Usage

__all__ = [
    "Api",
    "Model",
    "ModelCatalogue",
    "ProviderTemplate",
    "default_catalogue",
    "offline_model",
]

Api = Literal["openai_completions", "anthropic_messages", "offline"]
"""The wire protocol a model is reached with."""

_PER_MILLION = 1_000_000


@dataclass(frozen=True, kw_only=True, slots=True)
class Model:
    """One model: how to reach it, how big its window is, what it costs."""

    provider: str
    id: str
    api: Api
    base_url: str
    name: str = ""
    context_window: int = 32_768
    max_tokens: int = 4_096
    reasoning: bool = False
    image_input: bool | None = None
    """Whether the model takes images: ``True`` / ``False`` for models the catalogue knows,
    ``None`` when unknown (local servers, configured models: images are sent and the server
    decides). A model with ``False`` is sent a note in place of each image."""
    input_price: float = 0.0
    """Dollars per million uncached input tokens."""
    output_price: float = 0.0
    cache_read_price: float = 0.0
    cache_write_price: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    requires_key: bool = False
    """A hosted API that answers nothing without a key (the catalogue's OpenAI and Anthropic
    models): :func:`~lemon_ai.provider_for` refuses to build its provider without one, naming
    the variable, instead of letting the request fail at the network. Local servers need none."""

    @property
    def ref(self) -> str:
        """The ``provider:model_id`` reference."""
        return f"{self.provider}:{self.id}"

    def cost(self, usage: Usage) -> Cost:
        """The dollar cost of ``usage`` at this model's prices."""
        return Cost(
            input=usage.input_tokens * self.input_price / _PER_MILLION,
            output=usage.output_tokens * self.output_price / _PER_MILLION,
            cache_read=usage.cache_read_tokens * self.cache_read_price / _PER_MILLION,
            cache_write=usage.cache_write_tokens * self.cache_write_price / _PER_MILLION,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ProviderTemplate:
    """Defaults for a provider whose model ids are open-ended (local servers)."""

    provider: str
    api: Api
    base_url: str
    context_window: int = 32_768
    max_tokens: int = 4_096
    image_input: bool | None = None
    requires_key: bool = False

    def model(self, model_id: str) -> Model:
        """A model of this provider with the template's defaults and zero prices."""
        return Model(
            provider=self.provider,
            id=model_id,
            name=model_id,
            api=self.api,
            base_url=self.base_url,
            context_window=self.context_window,
            max_tokens=self.max_tokens,
            image_input=self.image_input,
            requires_key=self.requires_key,
        )


def offline_model() -> Model:
    """The offline model: the default when nothing is configured (no network, no cost)."""
    return Model(
        provider="offline",
        id="offline",
        name="Offline (no model configured)",
        api="offline",
        base_url="",
        context_window=1_000_000,
        max_tokens=4_096,
        image_input=False,
    )


def _hosted(
    provider: str,
    model_id: str,
    name: str,
    *,
    window: int,
    max_tokens: int,
    prices: tuple[float, float, float, float],
    reasoning: bool = False,
    images: bool = True,
) -> Model:
    api: Api = "anthropic_messages" if provider == "anthropic" else "openai_completions"
    base = "https://api.anthropic.com" if provider == "anthropic" else "https://api.openai.com/v1"
    return Model(
        provider=provider,
        id=model_id,
        name=name,
        api=api,
        base_url=base,
        context_window=window,
        max_tokens=max_tokens,
        reasoning=reasoning,
        image_input=images,
        input_price=prices[0],
        output_price=prices[1],
        cache_read_price=prices[2],
        cache_write_price=prices[3],
        requires_key=True,
    )


# Published list prices (input, output, cache read, cache write) in dollars per million tokens.
_BUILTIN: tuple[Model, ...] = (
    _hosted("openai", "gpt-4o", "GPT-4o", window=128_000, max_tokens=16_384,
            prices=(2.5, 10.0, 1.25, 0.0)),
    _hosted("openai", "gpt-4o-mini", "GPT-4o mini", window=128_000, max_tokens=16_384,
            prices=(0.15, 0.6, 0.075, 0.0)),
    _hosted("openai", "gpt-4.1", "GPT-4.1", window=1_047_576, max_tokens=32_768,
            prices=(2.0, 8.0, 0.5, 0.0)),
    _hosted("openai", "gpt-4.1-mini", "GPT-4.1 mini", window=1_047_576, max_tokens=32_768,
            prices=(0.4, 1.6, 0.1, 0.0)),
    _hosted("openai", "o3-mini", "o3-mini", window=200_000, max_tokens=100_000,
            prices=(1.1, 4.4, 0.55, 0.0), reasoning=True, images=False),
    _hosted("anthropic", "claude-sonnet-4-20250514", "Claude Sonnet 4", window=200_000,
            max_tokens=64_000, prices=(3.0, 15.0, 0.3, 3.75), reasoning=True),
    _hosted("anthropic", "claude-opus-4-20250514", "Claude Opus 4", window=200_000,
            max_tokens=32_000, prices=(15.0, 75.0, 1.5, 18.75), reasoning=True),
    _hosted("anthropic", "claude-3-5-haiku-20241022", "Claude Haiku 3.5", window=200_000,
            max_tokens=8_192, prices=(0.8, 4.0, 0.08, 1.0), images=False),
)  # fmt: skip

_TEMPLATES: tuple[ProviderTemplate, ...] = (
    ProviderTemplate(
        provider="openai", api="openai_completions", base_url="https://api.openai.com/v1",
        context_window=128_000, max_tokens=16_384, requires_key=True,
    ),
    ProviderTemplate(
        provider="anthropic", api="anthropic_messages", base_url="https://api.anthropic.com",
        context_window=200_000, max_tokens=8_192, requires_key=True,
    ),
    ProviderTemplate(provider="ollama", api="openai_completions",
                     base_url="http://127.0.0.1:11434/v1"),
    ProviderTemplate(provider="lmstudio", api="openai_completions",
                     base_url="http://127.0.0.1:1234/v1"),
    ProviderTemplate(provider="vllm", api="openai_completions",
                     base_url="http://127.0.0.1:8000/v1"),
    ProviderTemplate(provider="llamacpp", api="openai_completions",
                     base_url="http://127.0.0.1:8080/v1"),
    # The offline provider answers for any model id (``offline:offline`` is the listed one): a
    # listed provider must resolve, or the "known providers" of an error would lie.
    ProviderTemplate(provider="offline", api="offline", base_url="",
                     context_window=1_000_000, max_tokens=4_096, image_input=False),
)  # fmt: skip


class ModelCatalogue:
    """Known models and provider templates, looked up by ``provider:model_id``.

    The catalogue is immutable; :meth:`with_models` returns an extended copy (e.g. with models
    from the user's configuration).
    """

    def __init__(
        self, models: Iterable[Model] = (), templates: Iterable[ProviderTemplate] = ()
    ) -> None:
        self._models = {model.ref: model for model in models}
        self._templates = {template.provider: template for template in templates}

    def models(self) -> tuple[Model, ...]:
        """All listed models, sorted by reference."""
        return tuple(self._models[ref] for ref in sorted(self._models))

    def providers(self) -> tuple[str, ...]:
        """Every provider name the catalogue can resolve models for."""
        names = {model.provider for model in self._models.values()} | set(self._templates)
        return tuple(sorted(names))

    def with_models(self, models: Iterable[Model]) -> ModelCatalogue:
        """A copy with ``models`` added (replacing listed models with the same reference)."""
        return ModelCatalogue([*self._models.values(), *models], self._templates.values())

    def resolve(self, ref: str, *, base_url: str | None = None) -> Model:
        """The model for ``ref`` (``provider:model_id``), optionally at another ``base_url``.

        Raises :class:`UnknownModelError` when the reference is malformed or names an unknown
        provider.
        """
        provider, sep, model_id = ref.partition(":")
        if not sep or not provider or not model_id:
            raise UnknownModelError(
                f"model reference {ref!r} is not of the form 'provider:model_id' "
                f"(for example 'openai:gpt-4o-mini' or 'ollama:llama3.2')"
            )
        model = self._models.get(ref)
        if model is None:
            template = self._templates.get(provider)
            if template is None:
                raise UnknownModelError(
                    f"unknown provider {provider!r} in model reference {ref!r}; known providers: "
                    f"{', '.join(self.providers())}. An OpenAI-compatible server works as "
                    f"'openai:<model>' with its base_url"
                )
            model = template.model(model_id)
        if base_url is not None:
            model = replace(model, base_url=base_url)
        return model


def default_catalogue() -> ModelCatalogue:
    """The built-in catalogue: hosted OpenAI/Anthropic models, local-server templates, offline."""
    return ModelCatalogue([*_BUILTIN, offline_model()], _TEMPLATES)
