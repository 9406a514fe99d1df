"""The error hierarchy of lemon_cli.

A command turns every failure it expects into one clear line on stderr and an exit code, never
a traceback; the errors it raises on the way there sit under :class:`LemonCliError`::

    LemonCliError
    ├── _Failure                        lemon_cli.approvals_cmd: the message and the exit code
    ├── _WebhooksFailure                lemon_cli.webhooks_cmd: the message and the exit code
    ├── _DaemonRefused                  lemon_cli._chat_command: the home's daemon refused the chat
    ├── _Refused                        lemon_cli.store_cmd: a store command that cannot be done
    └── _ChannelsFailure                lemon_cli.channels_cmd: the message and the exit code

A test (``test_cli_error_tree.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

__all__ = ["LemonCliError"]


class LemonCliError(Exception):
    """Base class of every error raised by lemon_cli."""
