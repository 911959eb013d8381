"""The Python API: typed inputs and outputs, errors as exceptions that keep the core's words,
the flight recorder, and replay."""

from __future__ import annotations

from pathlib import Path

import pytest

import turnstile
from turnstile import EngineFailed, Engine, HostError, InputError, ReplayError
from turnstile.types import Cancel, Start, Submit


def test_a_typed_submit_is_answered_and_prepared() -> None:
    engine = Engine()
    engine.handle(0, Submit(session="s", prompt="hello", run_id="r1"))
    outputs = engine.outputs()
    assert [o.no for o in outputs] == [0, 1]
    assert [o.kind.type for o in outputs] == ["reply", "prepare"]
    assert outputs[0].to_json()["kind"]["run_id"] == "r1"
    assert engine.unfinished() == 1
    assert engine.poll_output() is None


def test_an_input_the_schema_refuses_names_its_field_and_changes_nothing() -> None:
    engine = Engine()
    with pytest.raises(InputError) as e:
        engine.handle(0, {"type": "cancel", "session": "s", "up_to": "x"})
    assert e.value.field == "up_to"
    assert "expected an unsigned integer" in str(e.value)
    with pytest.raises(InputError) as e:
        engine.handle(0, {"type": "submit", "session": "s", "prompt": "a", "runid": "r"})
    assert "is not a known field" in str(e.value)
    assert isinstance(e.value, ValueError)
    assert engine.outputs() == []
    assert engine.unfinished() == 0


def test_host_misuse_is_a_host_error_with_its_code_and_the_engine_goes_on() -> None:
    engine = Engine()
    engine.handle(10, Submit(session="s", prompt="a", run_id="r1"))
    engine.outputs()
    with pytest.raises(HostError) as e:
        engine.handle(5, Cancel(session="s"))
    assert e.value.code == "time_went_backwards"
    assert "time went backwards" in str(e.value)
    assert not isinstance(e.value, EngineFailed)
    engine.handle(10, Cancel(session="s"))
    kinds = [o.to_json()["kind"] for o in engine.outputs()]
    assert any(k["type"] == "finished" and k["outcome"] == "cancelled" for k in kinds), kinds


def test_an_exhausted_engine_fails_for_good() -> None:
    engine = Engine(start=Start.from_json({"next_seq": 2**64 - 2}))
    engine.handle(0, Submit(session="s", prompt="a"))
    with pytest.raises(EngineFailed) as e:
        engine.handle(0, Submit(session="s", prompt="b"))
    assert e.value.code == "exhausted"
    with pytest.raises(EngineFailed):
        engine.handle(0, Submit(session="s", prompt="c"))


def test_an_unusable_configuration_is_refused_at_start() -> None:
    with pytest.raises(InputError) as e:
        Engine({"step_limit": "many"})
    assert e.value.field == "config.step_limit"
    with pytest.raises(HostError) as e:
        Engine(start={"next_seq": 0})
    assert e.value.code == "invalid_start"


def test_the_flight_recorder_writes_a_trace_that_replays(tmp_path: Path) -> None:
    path = tmp_path / "flight.jsonl"
    engine = Engine(record=path)
    engine.handle(0, Submit(session="s", prompt="a", run_id="r1"))
    engine.handle(1, Cancel(session="s"))
    with pytest.raises(HostError):
        engine.handle(0, Cancel(session="s"))  # refused: not recorded
    lines = path.read_text().splitlines()
    assert len(lines) == 3, lines
    report = turnstile.replay(path)
    assert report.inputs == 2
    assert report.compared == 2
    assert report.run_completes == 1
    assert report.outcomes == {"cancelled": 1}


def test_a_trace_that_does_not_replay_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"format":"turnstile-trace","version":1}\n'
        '{"at":0,"input":{"type":"submit","session":"s","prompt":"a"},"expect":[]}\n'
    )
    with pytest.raises(ReplayError) as e:
        turnstile.replay(path)
    assert e.value.line == 2
    assert "bad.jsonl" in str(e.value)
    path.write_text('{"format":"turnstile-trace","version":1}\n{"at":"soon"}\n')
    with pytest.raises(ReplayError) as e:
        turnstile.replay(path)
    assert e.value.line == 2


def test_a_tool_left_to_finish_once_started_begins_only_if_not_aborted_first() -> None:
    from turnstile.types import (
        CallIo, InputStep, Prepared, Setup, StepEventFinished, StepEventToolCall, StepIo,
        ToolSpec, ToolStarted,
    )

    def started(cancel_first: bool) -> bool:
        engine = Engine()
        engine.handle(0, Submit(session="s", prompt="a", run_id="r"))
        tools = [ToolSpec(name="w", on_abort="finish_once_started")]
        engine.handle(0, Prepared(session="s", seq=1, setup=Setup(tools=tools)))
        step = StepIo(session="s", seq=1, turn=1, step=0, attempt=0)
        engine.handle(0, InputStep(step=step, event=StepEventToolCall(id="c", name="w", input="{}")))
        engine.handle(0, InputStep(step=step, event=StepEventFinished(reason="tool_calls")))
        call = CallIo(session="s", seq=1, turn=1, step=0, call="c")
        assert not engine.is_tool_started(call)
        if cancel_first:
            engine.handle(1, Cancel(session="s"))
        engine.handle(1, ToolStarted(call=call))
        return engine.is_tool_started(call.to_json())

    assert started(cancel_first=False)
    assert not started(cancel_first=True)
