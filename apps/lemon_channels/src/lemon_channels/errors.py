"""lemon_channels' errors. Runtime failures of a platform are data
(:class:`~lemon_core.channels.SendResult`, a FAILED :class:`~lemon_core.channels.ChannelStatus`),
not exceptions; what is raised is misuse::

    ChannelsError
    └── ChannelsUsageError (ValueError)    a bad argument (an ingress bound below 1, ...)

A test (``test_channels_public_api.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

__all__ = ["ChannelsError", "ChannelsUsageError"]


class ChannelsError(Exception):
    """Base of every error lemon_channels raises."""


class ChannelsUsageError(ChannelsError, ValueError):
    """A caller's mistake (an unknown pairing code format, say)."""
