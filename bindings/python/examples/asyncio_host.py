"""An asyncio host over the turnstile engine: a scripted model, a slow tool, real timers.

The engine is synchronous and pure; this host gives it a home in asyncio. Everything that
reaches the engine goes through one queue (the inbox) drained by one task, so inputs reach it
in one order, and time is the event loop's clock in milliseconds, never going backwards. Every
output is carried out by its class (docs/embedding.md):

- must answer: ``prepare`` (resolve the model and tools: answered at once), ``start_step`` (the
  scripted model streams its events), ``run_tool`` (a task runs the tool), ``set_timer`` (a
  real timer), ``refresh_credentials``, ``start_summary``;
- must perform: ``reply`` (answer the caller), ``store`` and ``commit`` (the in-memory store),
  ``finished`` (publish the completion, after its commit);
- may ignore: the ``abort_*`` outputs and ``cancel_timer`` (done here anyway, to save work),
  ``request_title``, ``stopped``.

Sub-agents are off: the turn's tools do not include ``agent``.

Run it: ``python bindings/python/examples/asyncio_host.py`` (with the package installed).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from turnstile import Engine
from turnstile.types import (
    Cancel,
    ClearQueue,
    Config,
    CredentialsRefreshed,
    Input,
    InputStep,
    InputSummary,
    InputToolResult,
    Output,
    OutputKindFinished,
    Prepared,
    Setup,
    Shutdown,
    StepEventFinished,
    StepEventToolCall,
    StepIo,
    Submit,
    TextDelta,
    TimerFired,
    ToolOutput,
    ToolSpec,
)

StepEvent = Union[TextDelta, StepEventToolCall, StepEventFinished]


def scripted_model(step: StepIo) -> List[StepEvent]:
    """The model: the first step of a turn calls the slow tool, the next one answers."""
    if step.step == 0:
        call_id = f"call-{step.session}-{step.seq}"
        return [
            TextDelta(text="Let me look."),
            StepEventToolCall(id=call_id, name="slow", input='{"ms": 30}'),
            StepEventFinished(reason="tool_calls"),
        ]
    return [TextDelta(text="Done."), StepEventFinished(reason="stop")]


@dataclass
class Waiter:
    """The caller of one submission, answered by its RunComplete."""

    future: "asyncio.Future[OutputKindFinished]"
    run_id: str


@dataclass
class AsyncHost:
    """One engine, driven from one task; any number of tasks submit, cancel and clear."""

    config: Config = field(default_factory=Config)
    engine: Engine = field(init=False)
    inbox: "asyncio.Queue[Tuple[Input, Optional[asyncio.Future[Any]]]]" = field(init=False)
    # Submissions by sequence, and callers waiting on a RunId.
    waiters: Dict[str, List[Waiter]] = field(default_factory=dict)
    seq_run: Dict[int, str] = field(default_factory=dict)
    # What was published, for the tests.
    run_completes: "Counter[str]" = field(default_factory=Counter)
    outcomes: Dict[str, str] = field(default_factory=dict)
    store: List[Dict[str, Any]] = field(default_factory=list)
    tools: Dict[str, "asyncio.Task[None]"] = field(default_factory=dict)
    timers: Dict[int, asyncio.TimerHandle] = field(default_factory=dict)
    stopped: "asyncio.Event" = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.engine = Engine(self.config)
        self.inbox = asyncio.Queue()
        self._t0 = asyncio.get_running_loop().time()
        self._now = 0
        self._task = asyncio.create_task(self._run())

    # --- what callers do ----------------------------------------------------------------

    async def submit(self, session: str, prompt: str, run_id: str) -> OutputKindFinished:
        """Submits a prompt as its own run and waits for its RunComplete."""
        loop = asyncio.get_running_loop()
        finished: "asyncio.Future[OutputKindFinished]" = loop.create_future()
        self.waiters.setdefault(run_id, []).append(Waiter(finished, run_id))
        await self._send(Submit(session=session, prompt=prompt, run_id=run_id))
        return await finished

    async def cancel(self, session: str) -> None:
        """Escape: cancels the session's unfinished work accepted so far (SPEC 4.10)."""
        await self._send(Cancel(session=session))

    async def clear(self, session: str) -> None:
        """Clears the session's queue: the waiting submissions end cancelled."""
        await self._send(ClearQueue(session=session))

    async def shutdown(self) -> None:
        """Stops the engine: unfinished runs end interrupted; returns once it has stopped."""
        await self._send(Shutdown())
        await self.stopped.wait()
        self._task.cancel()

    # --- the engine's task --------------------------------------------------------------

    async def _send(self, value: Input) -> None:
        done: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        self.inbox.put_nowait((value, done))
        await done

    def _post(self, value: Input) -> None:
        """An input produced by the host's own IO (a stream event, a tool result, a timer)."""
        self.inbox.put_nowait((value, None))

    def _clock(self) -> int:
        elapsed = int((asyncio.get_running_loop().time() - self._t0) * 1000)
        self._now = max(self._now, elapsed)
        return self._now

    async def _run(self) -> None:
        while True:
            value, done = await self.inbox.get()
            try:
                self.engine.handle(self._clock(), value)
                for output in self.engine.outputs():
                    self._act(output)
            except Exception as e:  # a refusal belongs to the caller that sent the input
                if done is None:
                    raise
                done.set_exception(e)
                continue
            if done is not None:
                done.set_result(None)

    def _act(self, output: Output) -> None:
        kind = output.kind
        if kind.type == "reply":
            record = kind.to_json()
            if record["reply"] in ("accepted", "existing") and "run_id" in record:
                self.seq_run[record["seq"]] = record["run_id"]
            if record["reply"] == "rejected":
                for w in self.waiters.pop(record.get("run_id", ""), []):
                    w.future.set_exception(RuntimeError(f"rejected: {record}"))
        elif kind.type == "prepare":
            tools = [ToolSpec(name="slow")]  # no `agent` tool: sub-agents off
            self._post(Prepared(session=kind.session, seq=kind.seq, setup=Setup(tools=tools)))
        elif kind.type == "start_step":
            asyncio.create_task(self._stream(kind.step))
        elif kind.type == "run_tool":
            call = kind.call  # `slow` is dropped on abort: its work begins now
            self.tools[call.call] = asyncio.create_task(self._slow_tool(call))
        elif kind.type == "abort_tool":
            task = self.tools.pop(kind.call.call, None)
            if task is not None:
                task.cancel()
        elif kind.type == "set_timer":
            delay = max(0, kind.deadline - self._now) / 1000
            self.timers[kind.timer] = asyncio.get_running_loop().call_later(
                delay, self._fire, kind.timer, kind.deadline
            )
        elif kind.type == "cancel_timer":
            handle = self.timers.pop(kind.timer, None)
            if handle is not None:
                handle.cancel()
        elif kind.type == "refresh_credentials":
            self._post(CredentialsRefreshed(attempt=kind.attempt, ok=True))
        elif kind.type == "start_summary":
            self._post(InputSummary(io=kind.io, event=TextDelta(text="So far.")))
            self._post(InputSummary(io=kind.io, event=StepEventFinished(reason="stop")))
        elif kind.type in ("store", "commit"):
            self.store.append(kind.to_json())
        elif kind.type == "finished":
            self._publish(kind)
        elif kind.type == "stopped":
            self.stopped.set()
        # The rest may be ignored (abort_step, abort_preparation, titles, ...): the engine
        # already behaves as if they were done.

    def _publish(self, kind: OutputKindFinished) -> None:
        run_id = kind.run_id
        if run_id is None:
            return  # a folded submission or a child's: no RunComplete
        self.run_completes[run_id] += 1
        self.outcomes[run_id] = kind.outcome
        for w in self.waiters.pop(run_id, []):
            if not w.future.done():
                w.future.set_result(kind)

    def _fire(self, timer: int, deadline: int) -> None:
        self.timers.pop(timer, None)
        # The loop's timers may fire a hair early; the engine refuses a timer before its time.
        self._now = max(self._now, deadline)
        self._post(TimerFired(timer=timer))

    async def _stream(self, step: StepIo) -> None:
        for event in scripted_model(step):
            await asyncio.sleep(0.002)
            self._post(InputStep(step=step, event=event))

    async def _slow_tool(self, call: Any) -> None:
        await asyncio.sleep(0.03)
        self.tools.pop(call.call, None)
        self._post(InputToolResult(call=call, result=ToolOutput(content="a.rs b.rs")))


async def main() -> None:
    host = AsyncHost()
    first = asyncio.create_task(host.submit("s", "List the files", "r1"))
    second = asyncio.create_task(host.submit("s", "And count them", "r2"))
    await asyncio.sleep(0.01)
    await host.cancel("s")  # Escape: both runs accepted so far end cancelled
    third = await host.submit("s", "Try again", "r3")
    print("r1:", (await first).outcome, "r2:", (await second).outcome, "r3:", third.outcome)
    await host.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
