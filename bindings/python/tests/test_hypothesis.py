"""Random inputs through the Python package and the process driver side by side: the same
outputs, and the same refusals, for every input.

The inputs are drawn as a host would send them, and as a careless host would: answers to what
the engine asked for (preparations, model stream events, tool results, timers, credential
refreshes, summaries), spontaneous prompts, cancels, clears and shutdowns, stale and repeated
answers, times that go backwards, and values the schema refuses."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Tuple

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import turnstile
from turnstile import EngineFailed, HostError, InputError

from conftest import Driver

SESSIONS = ["a", "b", "a/child-1"]
RUN_IDS = [None, "r1", "r2", "r3"]
Json = Dict[str, Any]

EXAMPLES = int(os.environ.get("TURNSTILE_HYPOTHESIS_EXAMPLES", "150"))


def spontaneous(draw: Callable[..., Any], newest: int) -> Json:
    """An input a client or the host may send at any time."""
    kind = draw(
        st.sampled_from(
            ["submit", "submit", "submit", "cancel", "cancel_run", "clear_queue", "summarize",
             "shutdown", "bad"]
        )
    )
    session = draw(st.sampled_from(SESSIONS))
    if kind == "submit":
        run_id = draw(st.sampled_from(RUN_IDS))
        prompt = draw(st.sampled_from(["hi", "list the files", "", " "]))
        submit: Json = {"type": "submit", "session": session, "prompt": prompt}
        if run_id is not None:
            submit["run_id"] = run_id
        if draw(st.booleans()):
            submit["mode"] = draw(st.sampled_from(["fold", "own_turn"]))
        return submit
    if kind == "cancel":
        cancel: Json = {"type": "cancel", "session": session}
        if draw(st.booleans()):
            cancel["up_to"] = draw(st.integers(min_value=0, max_value=newest + 1))
        return cancel
    if kind == "cancel_run":
        return {"type": "cancel_run", "run_id": draw(st.sampled_from(["r1", "r2", "r3", "r9"]))}
    if kind == "clear_queue":
        return {"type": "clear_queue", "session": session}
    if kind == "summarize":
        return {"type": "summarize", "session": session}
    if kind == "shutdown":
        return {"type": "shutdown"}
    # Values the schema refuses: the same error, naming the same field, on both sides.
    return draw(
        st.sampled_from(
            [
                {"type": "cancel", "session": session, "up_to": "x"},
                {"type": "submit", "session": session, "prompt": "a", "runid": "r"},
                {"type": "teleport", "session": session},
                {"type": "timer_fired"},
            ]
        )
    )


def answers(kind: Json, draw: Callable[..., Any], now: int) -> List[Tuple[int, Json]]:
    """The inputs that answer one output (possibly none, possibly several stream events), each
    with the time it arrives."""
    t = kind["type"]
    if t == "prepare":
        if draw(st.integers(0, 9)) == 0:
            return [(now, {"type": "preparation_failed", "session": kind["session"],
                           "seq": kind["seq"], "error": "no such model"})]
        setup = {"tools": [{"name": "ls"}, {"name": "slow"}]}
        return [(now, {"type": "prepared", "session": kind["session"], "seq": kind["seq"],
                       "setup": setup})]
    if t == "start_step":
        step = kind["step"]
        events: List[Json] = [{"kind": "text_delta", "text": "thinking"}]
        ending = draw(st.sampled_from(["stop", "tool", "fail", "cut"]))
        if ending == "tool":
            events.append({"kind": "tool_call", "id": f"c{now}", "name":
                           draw(st.sampled_from(["ls", "slow", "missing"])), "input": "{}"})
            events.append({"kind": "finished", "reason": "tool_calls"})
        elif ending == "fail":
            status, cls = draw(st.sampled_from(
                [(401, "unauthorized"), (429, "provider"), (500, "provider"), (None, "transport")]
            ))
            events.append({"kind": "failed", "error": {"class": cls, "status": status,
                                                      "message": "provider said no"}})
        elif ending == "stop":
            events.append({"kind": "finished", "reason": "stop",
                           "usage": {"input_tokens": 10, "output_tokens": 5}})
        return [(now, {"type": "step", "step": step, "event": e}) for e in events]
    if t == "run_tool":
        call = kind["call"]
        out: List[Tuple[int, Json]] = [(now, {"type": "tool_started", "call": call})]
        result: Json = {"content": "a.rs b.rs"}
        if draw(st.booleans()):
            result["is_error"] = True
        out.append((now + draw(st.integers(0, 50)), {"type": "tool_result", "call": call,
                                                     "result": result}))
        return out
    if t == "set_timer":
        return [(max(now, kind["deadline"]), {"type": "timer_fired", "timer": kind["timer"]})]
    if t == "refresh_credentials":
        return [(now, {"type": "credentials_refreshed", "attempt": kind["attempt"],
                       "ok": draw(st.booleans())})]
    if t == "start_summary":
        io = kind["io"]
        return [(now, {"type": "summary", "io": io, "event": {"kind": "text_delta",
                                                            "text": "So far"}}),
                (now, {"type": "summary", "io": io, "event": {"kind": "finished",
                                                            "reason": "stop"}})]
    if t == "request_title":
        return [(now, {"type": "title_generated", "session": kind["session"], "seq": kind["seq"],
                       "title": "A title"})]
    return []


def python_side(engine: turnstile.Engine, at: int, value: Json) -> Json:
    """The Python package's answer, in the driver's reply vocabulary."""
    try:
        engine.handle(at, value)
    except InputError as e:
        return {"type": "error", "field": e.field}
    except EngineFailed as e:
        return {"type": "failed", "code": e.code, "message": e.message}
    except HostError as e:
        return {"type": "refused", "code": e.code, "message": e.message}
    outputs: List[Json] = []
    while (o := engine.poll_output_json()) is not None:
        outputs.append(o)
    return {"type": "outputs", "outputs": outputs}


def driver_side(reply: Json) -> Json:
    """The driver's reply, with what the Python side cannot know (line numbers, the field path
    below `input`, the classes) taken out."""
    t = reply["type"]
    if t == "error":
        field: Optional[str] = reply.get("field")
        if field is not None and field.startswith("input."):
            field = field[len("input."):]
        elif field == "input":
            field = None
        return {"type": "error", "field": field}
    if t in ("refused", "failed"):
        return {"type": t, "code": reply["code"], "message": reply["message"]}
    return {"type": "outputs", "outputs": reply["outputs"]}


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_python_and_the_driver_agree_on_random_inputs(data: st.DataObject) -> None:
    draw = data.draw
    config: Json = {"cancel_grace_ms": draw(st.sampled_from([0, 200]))}
    header = {"format": "turnstile-trace", "version": 1, "config": config}
    engine = turnstile.Engine(config)
    driver = Driver(header)
    try:
        now = 0
        pending: List[Tuple[int, Json]] = []  # answers the engine asked for, not yet sent
        newest = 0
        for _ in range(draw(st.integers(5, 60))):
            choice = draw(st.integers(0, 9))
            if pending and choice < 6:
                # Answers mostly in order, sometimes out of order, sometimes twice (stale).
                i = 0 if choice < 4 else draw(st.integers(0, len(pending) - 1))
                at, value = pending[i] if choice == 5 else pending.pop(i)
                now = max(now, at)
            else:
                value = spontaneous(draw, newest)
                now += draw(st.integers(0, 400))
            at = now - 1 if now > 0 and draw(st.integers(0, 30)) == 0 else now
            ours = python_side(engine, at, value)
            theirs = driver_side(driver.send({"at": at, "input": value}))
            assert ours == theirs, f"input {value} at {at}"
            event(f"reply: {ours['type']}")
            if ours["type"] == "failed":
                return
            for o in ours.get("outputs", []):
                kind = o["kind"]
                if kind["type"] == "finished":
                    event(f"outcome: {kind['outcome']}")
                if kind["type"] == "reply" and "seq" in kind:
                    newest = max(newest, kind["seq"])
                pending.extend(answers(kind, draw, now))
    finally:
        driver.close()
