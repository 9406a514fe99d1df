"""Router settings: bounds, the followup window, backoff and failure-handling timings."""

from __future__ import annotations

from dataclasses import dataclass

from lemon_core.backoff import Backoff
from lemon_router.errors import RouterUsageError


@dataclass(frozen=True, kw_only=True, slots=True)
class RouterConfig:
    """Every bound and timing of the router (milliseconds unless named otherwise)."""

    max_pending_per_conversation: int = 32
    """Queued plus in-flight steers per conversation; past it a submission is rejected."""
    max_conversations: int = 10_000
    """Conversations with anything active or queued; past it a new conversation is rejected."""
    followup_window_ms: int = 500
    max_merged_parts: int = 16
    max_merged_chars: int = 32_000
    submit_backoff_initial_ms: int = 100
    """The wait before resubmitting to an unavailable engine runtime; doubles each time..."""
    submit_backoff_max_ms: int = 2_000
    """... up to this."""
    submit_backoff_jitter: float = 0.2
    """Up to this fraction of each wait is taken off at random (0: exact waits)."""
    submit_timeout_ms: int = 120_000
    """How long a run keeps retrying an unavailable engine runtime before it fails."""
    run_failed_grace_ms: int = 1_000
    """After ``run_failed``, how long to wait for a real ``run_completed``."""
    cancel_grace_ms: int = 5_000
    """After asking the runtime to cancel, how long to wait for its ``run_completed``."""
    liveness_interval_ms: int | None = 1_000
    """How often to ask a runtime that can tell whether the run still exists (None: never)."""
    vanish_grace_ms: int = 1_500
    """A run the runtime no longer knows gets a synthetic completion after this long."""
    idle_timeout_ms: int | None = 7_200_000
    """No event for this long cancels the run (the watchdog; None disables it)."""
    retry_zero_answer: bool = True
    """Resubmit once a run that failed with no answer."""
    run_event_buffer: int = 4_096
    """Bound of each run's event subscription (overflow: the session gets a notice)."""
    lease_ttl_ms: int = 15_000
    """With sessions shared across daemons: the owner lease's ttl (renewed every third)."""
    inbox_sweep: bool = True
    """With sessions shared: every ``lease_ttl_ms`` take the sessions whose handed-off
    messages wait for an owner that is gone (tests turn it off and sweep by hand)."""
    handoff_timeout_ms: int = 30_000
    """How long a message handed to another daemon's session waits for the owner's receipt
    (past it the receipt says ``queued`` with reason ``handed_off``: the message is recorded)."""

    def __post_init__(self) -> None:
        for name in (
            "max_pending_per_conversation",
            "max_conversations",
            "max_merged_parts",
            "max_merged_chars",
            "submit_backoff_initial_ms",
            "submit_backoff_max_ms",
            "run_event_buffer",
            "lease_ttl_ms",
            "handoff_timeout_ms",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise RouterUsageError(f"RouterConfig.{name} must be a positive int, got {value!r}")
        for name in (
            "followup_window_ms",
            "submit_timeout_ms",
            "run_failed_grace_ms",
            "cancel_grace_ms",
            "vanish_grace_ms",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise RouterUsageError(f"RouterConfig.{name} must be an int >= 0, got {value!r}")
        if not 0.0 <= self.submit_backoff_jitter <= 1.0:
            raise RouterUsageError(
                "RouterConfig.submit_backoff_jitter must be within [0, 1], "
                f"got {self.submit_backoff_jitter!r}"
            )
        if self.submit_backoff_max_ms < self.submit_backoff_initial_ms:
            raise RouterUsageError(
                "RouterConfig.submit_backoff_max_ms must be >= submit_backoff_initial_ms"
            )

    @property
    def submit_backoff(self) -> Backoff:
        """The submit retry's delays (seconds; the run process waits them in whole ms)."""
        return Backoff(
            initial=self.submit_backoff_initial_ms / 1000,
            cap=self.submit_backoff_max_ms / 1000,
            jitter=self.submit_backoff_jitter,
        )
