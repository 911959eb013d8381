"""turnstile.types against the core's own traces: every input and output read and written back
exactly, and the generated file current with the schema (tools/gen_types.py --check)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[3]  # bindings/python/tests -> the repository
SOURCE = ROOT / "bindings" / "python" / "python"
TYPES_PY = SOURCE / "turnstile" / "types.py"
GENERATOR = ROOT / "bindings" / "python" / "tools" / "gen_types.py"
SCHEMA = ROOT / "core" / "trace-format.schema.json"
TRACES = ROOT / "tests" / "traces"


def _load_types() -> ModuleType:
    """`turnstile.types`: the installed package's (CI installs the wheel), else this checkout's."""
    if importlib.util.find_spec("turnstile") is None:
        sys.path.insert(0, str(SOURCE))
    try:
        return importlib.import_module("turnstile.types")
    except ImportError:
        # A checkout whose native module is not built: turnstile/__init__.py imports it and
        # fails. types.py needs nothing of the package, so load this checkout's file on its own
        # (never a stale copy: only when `turnstile` is this checkout's).
        spec = importlib.util.find_spec("turnstile")
        here = [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []
        if (SOURCE / "turnstile").resolve() not in here:
            raise
        file_spec = importlib.util.spec_from_file_location("_turnstile_types", TYPES_PY)
        assert file_spec is not None and file_spec.loader is not None
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[file_spec.name] = module  # dataclasses looks the module up
        file_spec.loader.exec_module(module)
        return module


T = _load_types()
TRACE_FILES = sorted(TRACES.rglob("*.jsonl"))


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _round_trip(failures: List[str], where: str, read: Callable[[Any], Any], value: Any) -> None:
    """Records a failure unless `read(value).to_json()` is `value` exactly.

    Compared as canonical JSON text, not with `==`: in Python `1 == 1.0 == True`, so `==`
    would let a wrong number or boolean type through."""
    try:
        written = read(value).to_json()
    except Exception as e:  # noqa: BLE001 - report it with the trace line
        failures.append(f"{where}: {type(e).__name__}: {e}\n    read:    {_text(value)}")
        return
    if _text(written) != _text(value):
        failures.append(f"{where}: not written back as read\n    read:    {_text(value)}\n"
                        f"    written: {_text(written)}")


def test_traces_are_found() -> None:
    assert TRACE_FILES, f"no *.jsonl under {TRACES}"


@pytest.mark.parametrize("path", TRACE_FILES, ids=[str(p.relative_to(TRACES)) for p in TRACE_FILES])
def test_trace_round_trips(path: Path) -> None:
    """Every header (with its config and start), line, input and expected output of a trace."""
    failures: List[str] = []
    lines = [(n, text) for n, text in enumerate(path.read_text("utf-8").splitlines(), 1)
             if text.strip()]
    assert lines, f"{path}: empty trace"
    rel = path.relative_to(ROOT)
    for i, (n, text) in enumerate(lines):
        value: Dict[str, Any] = json.loads(text)
        at = f"{rel}:{n}"
        if i == 0:  # the header
            _round_trip(failures, f"{at} TraceHeader", T.TraceHeader.from_json, value)
            if "config" in value:
                _round_trip(failures, f"{at} config", T.Config.from_json, value["config"])
            if "start" in value:
                _round_trip(failures, f"{at} start", T.Start.from_json, value["start"])
            continue
        _round_trip(failures, f"{at} TraceLine", T.TraceLine.from_json, value)
        _round_trip(failures, f"{at} input", T.input_from_json, value["input"])
        for k, output in enumerate(value.get("expect") or []):
            _round_trip(failures, f"{at} expect[{k}]", T.Output.from_json, output)
        if value.get("expect_projection") is not None:
            _round_trip(failures, f"{at} expect_projection", T.Projection.from_json,
                        value["expect_projection"])
    assert not failures, f"{len(failures)} value(s) do not round-trip:\n" + "\n".join(failures[:20])


def test_config_and_start_defaults_are_the_cores() -> None:
    """`Config()` and `Start()` write exactly the header defaults the schema states."""
    header = json.loads(SCHEMA.read_text("utf-8"))["$defs"]["TraceHeader"]["properties"]
    assert T.Config().to_json() == header["config"]["default"]
    assert T.Start().to_json() == header["start"]["default"]
    assert T.TraceHeader(format="turnstile-trace", version=1).to_json() == {
        "format": "turnstile-trace", "version": 1,
        "config": header["config"]["default"], "start": header["start"]["default"]}


def test_variants_write_their_tag_and_skip_absent_fields() -> None:
    submit = T.Submit(session="s", prompt="hi", run_id="r1")
    assert submit.type == "submit"
    assert submit.to_json() == {"type": "submit", "session": "s", "prompt": "hi", "run_id": "r1"}
    assert T.input_from_json(submit.to_json()) == submit


def test_dispatch_picks_the_variant_and_names_an_unknown_tag() -> None:
    assert isinstance(T.input_from_json({"type": "shutdown"}), T.Shutdown)
    store = {"type": "store", "op": "flush", "session": "s"}
    assert isinstance(T.output_kind_from_json(store), T.OutputKindFlush)
    with pytest.raises(ValueError, match="launch"):
        T.input_from_json({"type": "launch"})
    with pytest.raises(ValueError, match="teleport"):
        T.output_kind_from_json({"type": "store", "op": "teleport", "session": "s"})


def test_from_json_refuses_unknown_and_missing_fields() -> None:
    with pytest.raises(ValueError, match="bogus"):
        T.Submit.from_json({"type": "submit", "session": "s", "prompt": "p", "bogus": 1})
    with pytest.raises(ValueError, match="prompt"):
        T.Submit.from_json({"type": "submit", "session": "s"})
    with pytest.raises(ValueError, match="cancel"):
        T.Submit.from_json({"type": "cancel", "session": "s", "prompt": "p"})


def test_types_imports_only_the_standard_library() -> None:
    """The wheel's native module must never be needed to use the types."""
    imported = set()
    for node in ast.walk(ast.parse(TYPES_PY.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." if node.level else (node.module or "").split(".")[0])
    assert imported <= {"__future__", "dataclasses", "typing"}, imported


def test_generated_file_is_current() -> None:
    done = subprocess.run([sys.executable, str(GENERATOR), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
