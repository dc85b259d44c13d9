"""The errors of the command line and how every entry point reports them.

A bad input gets one line on stderr, ``error: ...``, naming the file, row or parameter and what was
expected, and an exit status: 2 for a usage error (a bad argument, option or setting), 1 for a data
error (a missing, malformed or damaged file). The traceback is shown only with ``--debug`` (anywhere on
the command line) or the environment variable ``INFILOOP_DEBUG=1``.

    UsageError   a bad argument, option or ``--set`` value (exit status 2); configuration checks that
                 raise a plain ``ValueError`` count as usage errors too
    DataError    malformed or damaged data (exit status 1): the message names the file, the line and the fault
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable

__all__ = ["DataError", "Parser", "StorageError", "UsageError", "exit_status", "message", "run_command"]

USAGE_STATUS, DATA_STATUS, INTERRUPTED_STATUS = 2, 1, 130
_debug_active = False  # set while an outer run_command runs with --debug, so nested entry points see it


class DataError(ValueError):
    """Malformed or inconsistent data; the message names the file, the line and the fault."""


class StorageError(OSError):
    """A file that could not be written: no space left, over quota, a read-only folder or no permission. The
    message names the file, the reason (with the free space where it is the reason) and what was kept."""

    def __str__(self) -> str:
        return self.args[-1] if self.args else "could not write"


class UsageError(ValueError):
    """A bad argument, option or setting; the message names it and says what was expected."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are :class:`UsageError` (one line, exit status 2), not a usage dump."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def exit_status(e: BaseException) -> int:
    """2 for a usage error, 1 for a data error or anything else, 130 for an interruption."""
    if isinstance(e, KeyboardInterrupt):
        return INTERRUPTED_STATUS
    if isinstance(e, (DataError, OSError)):
        return DATA_STATUS
    if isinstance(e, ValueError):
        return USAGE_STATUS
    return DATA_STATUS


def message(e: BaseException) -> str:
    """The one line that describes ``e`` (without the ``error:`` prefix): a message of several lines (a library's
    reason quoted in ours) is folded into one."""
    return " ".join(_message(e).split())


def _message(e: BaseException) -> str:
    if isinstance(e, KeyboardInterrupt):
        return "interrupted"
    if isinstance(e, StorageError):
        return str(e)
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: {e.strerror or e}"
    if isinstance(e, (ValueError, OSError)):
        return str(e)
    return f"{type(e).__name__}: {e} (unexpected; run again with --debug for the traceback)"


def split_debug(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether a traceback was asked for (``--debug`` or ``INFILOOP_DEBUG``), and ``argv`` without the flag."""
    env = os.environ.get("INFILOOP_DEBUG", "").strip().lower() not in ("", "0", "false", "no")
    return "--debug" in argv or env or _debug_active, [a for a in argv if a != "--debug"]


def run_command(fn: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a command's ``fn(argv)`` and turn any error into one ``error:`` line and its exit status."""
    global _debug_active
    debug, argv = split_debug(list(argv))
    outer, _debug_active = _debug_active, debug
    try:
        return fn(argv)
    except (Exception, KeyboardInterrupt) as e:
        if debug:
            traceback.print_exc()
        print(f"error: {message(e)}", file=sys.stderr, flush=True)
        return exit_status(e)
    finally:
        _debug_active = outer
