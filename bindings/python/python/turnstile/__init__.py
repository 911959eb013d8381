"""turnstile from Python: the checked session lifecycle engine for LLM agent hosts.

The engine is the Rust core itself (a native module); this layer gives it typed inputs and
outputs (``turnstile.types``, generated from the trace format's JSON Schema) and Python
exceptions (``turnstile.errors``). A host follows the core's protocol: hand the engine one
input with ``handle(now_ms, input)``, then drain ``poll_output()`` and carry out each output,
feeding back what it produces; time is an input, so the same inputs give the same outputs.

    >>> from turnstile import Engine
    >>> from turnstile.types import Submit
    >>> engine = Engine()
    >>> engine.handle(0, Submit(session="s", prompt="hello", run_id="r1"))
    >>> [o.kind.type for o in engine.outputs()]
    ['reply', 'prepare']

See docs/embedding.md in the repository for the protocol, the output classes a host must
answer, the recovery rules, and an asyncio example host.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from . import _native, types
from .errors import EngineFailed, HostError, InputError, ReplayError, TurnstileError
from .types import CallIo, Config, Input, Output, Start

__all__ = [
    "Engine",
    "ReplayReport",
    "replay",
    "types",
    "TurnstileError",
    "InputError",
    "HostError",
    "EngineFailed",
    "ReplayError",
    "TRACE_FORMAT",
    "TRACE_VERSION",
]

TRACE_FORMAT: str = _native.TRACE_FORMAT
TRACE_VERSION: int = _native.TRACE_VERSION

JsonObject = Dict[str, Any]
PathLikeStr = Union[str, "os.PathLike[str]"]


class Engine:
    """One turnstile engine (the Rust core).

    ``config`` and ``start`` are the engine's configuration and start state (defaults: the
    core's, and an empty store). With ``record``, every input handled is appended to that trace
    file with its outputs (the flight recorder); ``turnstile.replay`` and ``turnstile-sim
    replay`` reproduce it.

    Inputs may be the typed classes of ``turnstile.types`` or their JSON dicts; outputs are
    typed (``poll_output``) or JSON dicts (``poll_output_json``).
    """

    def __init__(
        self,
        config: Optional[Union[Config, JsonObject]] = None,
        start: Optional[Union[Start, JsonObject]] = None,
        *,
        record: Optional[PathLikeStr] = None,
    ) -> None:
        header: JsonObject = {"format": TRACE_FORMAT, "version": TRACE_VERSION}
        if config is not None:
            header["config"] = config if isinstance(config, dict) else config.to_json()
        if start is not None:
            header["start"] = start if isinstance(start, dict) else start.to_json()
        self._native = _native.Engine(
            json.dumps(header), None if record is None else os.fspath(record)
        )

    def handle(self, now_ms: int, input: Union[Input, JsonObject]) -> None:
        """Hands the engine one input at ``now_ms`` (never earlier than the previous input's).

        Raises ``InputError`` for an input the schema refuses (nothing changed), ``HostError``
        for host misuse (nothing changed), ``EngineFailed`` when the engine failed.
        """
        value = input if isinstance(input, dict) else input.to_json()
        self._native.handle(now_ms, json.dumps(value))

    def poll_output(self) -> Optional[Output]:
        """The next output, or ``None`` when the engine has nothing more to say."""
        text = self._native.poll_output()
        return None if text is None else Output.from_json(json.loads(text))

    def poll_output_json(self) -> Optional[JsonObject]:
        """The next output as its JSON dict (the trace format's), or ``None``."""
        text = self._native.poll_output()
        return None if text is None else _object(json.loads(text))

    def outputs(self) -> List[Output]:
        """Every output waiting, in order."""
        out: List[Output] = []
        while (o := self.poll_output()) is not None:
            out.append(o)
        return out

    @property
    def now(self) -> int:
        """The time of the newest input, in milliseconds."""
        return self._native.now()

    def next_deadline(self) -> Optional[int]:
        """The earliest armed timer's deadline, in milliseconds."""
        return self._native.next_deadline()

    def unfinished(self) -> int:
        """Submissions accepted and not yet finished."""
        return self._native.unfinished()

    def is_stopped(self) -> bool:
        """Whether the engine stopped (after a shutdown, or a failure)."""
        return self._native.is_stopped()

    def is_busy(self, session: str) -> bool:
        """Whether the session has a turn running."""
        return self._native.is_busy(session)

    def queue_len(self, session: str) -> int:
        """Submissions waiting in the session's queue."""
        return self._native.queue_len(session)

    def is_tool_started(self, call: Union[CallIo, JsonObject]) -> bool:
        """Whether a call's work may begin: the host reported ``ToolStarted`` for it before any
        abort. A tool left to finish once started (``on_abort="finish_once_started"``) begins
        its work only when this is true right after that input; when false, the call was
        aborted and its work must never begin."""
        value = call if isinstance(call, dict) else call.to_json()
        return self._native.is_tool_started(json.dumps(value))


def _object(value: Any) -> JsonObject:
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class ReplayReport:
    """What a successful replay saw."""

    inputs: int
    outputs: int
    outcomes: Dict[str, int]
    run_completes: int
    unfinished: int
    compared: int
    output_hash: str
    """SHA-256 over every output's JSON, in order: equal hashes mean identical runs."""


def replay(path: PathLikeStr) -> ReplayReport:
    """Replays a trace file in the Rust core: every invariant after every input, every expected
    output compared. Raises ``ReplayError`` naming the line at fault."""
    report = json.loads(_native.replay(os.fspath(path)))
    return ReplayReport(**report)
