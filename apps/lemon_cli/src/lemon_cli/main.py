"""The ``lemon`` console script's entry: a front that answers two command lines without Typer.

Importing Typer is two thirds of ``lemon --help`` and a fifth of a one-shot ``lemon chat``, so:

- ``lemon --help`` prints the root help that Typer prints (:mod:`lemon_cli._help_text`,
  generated from the Typer application by ``python -m lemon_cli._help_text --write``; a test
  and ``--check`` keep it equal to Typer's) when Typer would format it at that width (a
  terminal of at least 80 columns, or none);
- ``lemon chat ...`` with a plain command line (:func:`lemon_cli._chat_command.parse_chat_args`)
  runs the command's body itself, with Typer's handling of what escapes a command (Ctrl-C is
  exit 130, end of input ``Aborted!`` and exit 1, a closed pipe exit 1), and exits without
  the interpreter's teardown (:func:`_finish`);

every other command line, and these when the program is not run as ``lemon`` (``python -c``,
shell completion), goes to the Typer application (:mod:`lemon_cli._app`) as before.
``app`` and ``ensure_daemon`` are the application's, loaded on first use.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing is a third of ``lemon --help``
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from lemon_cli._app import app, ensure_daemon

__all__ = ["app", "ensure_daemon", "main"]

_LAZY = ("app", "ensure_daemon")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from lemon_cli import _app

        return getattr(_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _as_lemon() -> bool:
    """Whether Typer would call this program ``lemon`` (the name in its usage lines) and has
    no shell completion to answer."""
    main_module = sys.modules.get("__main__")
    return (
        os.path.basename(sys.argv[0]) == "lemon"
        and not getattr(main_module, "__package__", None)
        and not any(name.startswith("_LEMON_COMPLETE") for name in os.environ)
    )


def _help_width() -> int:
    """The width Click formats help at here (its ``HelpFormatter`` default: the columns of
    ``shutil.get_terminal_size()``, read here as it reads them, since importing shutil costs
    as much as the rest of ``lemon --help``)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno() if stdout else -1).columns or 80
        except (ValueError, OSError):  # no stream, or not a terminal: shutil's fallback
            columns = 80
    return max(min(columns, 80) - 2, 50)


def _standalone(body: Callable[[], int]) -> int:
    """``body()``'s exit code, with what escapes it handled as Typer's ``main`` handles what
    escapes a command."""
    import errno

    try:
        return body()
    except KeyboardInterrupt:
        return 130
    except EOFError:
        print(file=sys.stderr)
        print("Aborted!", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        from typer._click.utils import PacifyFlushWrapper

        sys.stdout = PacifyFlushWrapper(sys.stdout)  # as Click does
        sys.stderr = PacifyFlushWrapper(sys.stderr)  # as Click does
        return 1
    except Exception as exc:
        code = _typer_exit(exc)  # a helper the body called may speak Typer's exceptions
        if code is None:
            raise
        return code


def _typer_exit(exc: Exception) -> int | None:
    """The exit code Typer's ``main`` gives ``exc`` (after saying what it says), or ``None``
    for an exception that is not Typer's; Typer is looked at only when it is loaded."""
    typer_errors = sys.modules.get("typer.exceptions")
    click_errors = sys.modules.get("typer._click.exceptions")
    if typer_errors is not None and isinstance(exc, typer_errors.Exit):
        return int(exc.exit_code)
    if typer_errors is not None and isinstance(exc, typer_errors.Abort):
        print("Aborted!", file=sys.stderr)
        return 1
    if click_errors is not None and isinstance(exc, click_errors.ClickException):
        exc.show()
        return int(exc.exit_code)
    return None


def _finish(code: int) -> None:
    """Exit with ``code`` as ``sys.exit`` would, without tearing the interpreter down.

    Freeing every module of a one-shot (some 700 of them) is a fifteenth of its run and does
    nothing the user sees; so, when no other thread runs (a thread would be waited for), the
    exit handlers run and both streams are flushed as the normal exit does, then the process
    ends. A stream that cannot be flushed (a closed pipe) takes the normal exit, and so says
    what it always said."""
    import threading

    if threading.active_count() > 1:
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(code)
    os._exit(code)


def main() -> None:
    """Console-script entry point."""
    args = sys.argv[1:]
    if _as_lemon():
        if args == ["--help"]:
            from lemon_cli._help_text import ROOT_HELP, WIDTH

            if _help_width() == WIDTH:
                sys.stdout.write(ROOT_HELP)
                sys.stdout.flush()
                return
        elif args[:1] == ["chat"]:
            from lemon_cli._chat_command import parse_chat_args, run_chat

            parsed = parse_chat_args(args[1:])
            if parsed is not None:
                _finish(_standalone(lambda: run_chat(parsed)))
    from lemon_cli._app import main as typer_main

    typer_main()
