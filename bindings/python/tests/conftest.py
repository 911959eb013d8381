"""Shared by the tests: the repository's root, the recorded traces, and the process driver."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
TRACES = sorted((ROOT / "tests" / "traces").rglob("*.jsonl"))


def driver_path() -> str:
    """``TURNSTILE_DRIVER``, else the workspace's build of it, else one on ``PATH``."""
    env = os.environ.get("TURNSTILE_DRIVER")
    if env:
        return env
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    for profile in ("debug", "release"):
        built = target / profile / "turnstile-driver"
        if built.exists():
            return str(built)
    found = shutil.which("turnstile-driver")
    if found is None:
        raise RuntimeError(
            "turnstile-driver not found: build it (cargo build -p turnstile-driver) or set "
            "TURNSTILE_DRIVER"
        )
    return found


class Driver:
    """One ``turnstile-driver`` process, one line in and one reply out at a time."""

    def __init__(self, header: Dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [driver_path()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        ready = self.send(header)
        if ready["type"] != "ready":
            raise RuntimeError(f"the driver refused the header: {ready}")

    def send(self, line: Dict[str, Any]) -> Dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(line) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            raise RuntimeError(f"the driver exited with {self.proc.wait()}")
        value: Dict[str, Any] = json.loads(reply)
        return value

    def close(self) -> Optional[int]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=10)


@pytest.fixture
def driver_factory() -> Iterator[Any]:
    started: List[Driver] = []

    def make(header: Dict[str, Any]) -> Driver:
        d = Driver(header)
        started.append(d)
        return d

    yield make
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()


def read_trace(path: Path) -> List[Dict[str, Any]]:
    """The trace's non-blank lines as JSON, each with its 1-based file line under ``_line``."""
    lines = []
    for n, text in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if text.strip():
            value = json.loads(text)
            value["_line"] = n
            lines.append(value)
    return lines
