"""Every recorded trace replays through the Python package exactly as in the Rust core: the
outputs of every line equal the trace's recorded ones and the process driver's, and the
SHA-256 over all of them equals the Rust replay's (which also checks every invariant)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

import turnstile
from turnstile.types import Output

from conftest import TRACES, read_trace


def canonical(value: Any) -> str:
    """An output as the Rust replay hashes it (serde_json: sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_the_traces_are_there() -> None:
    assert len(TRACES) > 90
    assert any(p.parent.name == "regressions" for p in TRACES)


@pytest.mark.parametrize("path", TRACES, ids=[str(p.relative_to(p.parents[1])) for p in TRACES])
def test_trace_replays_identically(path: Path, driver_factory: Any) -> None:
    report = turnstile.replay(path)
    header, *lines = read_trace(path)
    header.pop("_line")
    engine = turnstile.Engine(header.get("config"), header.get("start"))
    driver = driver_factory(header)
    digest = hashlib.sha256()
    for i, line in enumerate(lines):
        n = line["_line"]
        engine.handle(line["at"], line["input"])
        outputs: List[Dict[str, Any]] = []
        while (o := engine.poll_output_json()) is not None:
            outputs.append(o)
        where = f"{path.name} line {n}"
        if "expect" in line:
            assert outputs == line["expect"], f"{where}: Python differs from the recording"
        reply = driver.send({"at": line["at"], "input": line["input"]})
        assert reply["type"] == "outputs", f"{where}: {reply}"
        assert reply["line"] == i + 2, f"{where}: the driver numbers the lines it was sent"
        assert outputs == reply["outputs"], f"{where}: Python differs from the driver"
        for o in outputs:
            # The typed classes carry every output whole.
            assert Output.from_json(o).to_json() == o, f"{where}: typed round trip of {o}"
            digest.update(canonical(o).encode("utf-8") + b"\n")
    assert digest.hexdigest() == report.output_hash, f"{path.name}: the run differs from Rust's"
    assert report.inputs == len(lines)
