"""The exceptions of the turnstile package. Each keeps the core's own message."""

from __future__ import annotations

from typing import Optional


class TurnstileError(Exception):
    """The base of every error the package raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InputError(TurnstileError, ValueError):
    """An input, configuration or start state that is not what the trace schema describes.

    ``field`` names the field at fault by its path (``input.up_to``), when one is. The engine did
    not see the input and is unchanged.
    """

    def __init__(self, message: str, field: Optional[str] = None) -> None:
        super().__init__(message)
        self.field = field


class HostError(TurnstileError):
    """The engine refused the input as host misuse (time going backwards, a timer reported
    before its deadline, ...): nothing changed and the engine goes on.

    ``code`` is the core's name for the kind of error (``time_went_backwards``, ...).
    """

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class EngineFailed(HostError):
    """The engine failed (a counter at its maximum, or a bug it found in itself) and accepts no
    further input: start a new engine from the store (its recovery decides what was unfinished).
    """


class ReplayError(TurnstileError):
    """A trace did not replay: unreadable, refused, an invariant broken, or outputs that differ.

    ``line`` is the trace file's 1-based line at fault, when one is.
    """

    def __init__(self, message: str, line: Optional[int] = None) -> None:
        super().__init__(message)
        self.line = line
