"""Events per second through the Python package and through the process driver, beside the
Rust core alone on the same inputs, in the same run (this machine is shared and noisy: only the
ratios measured together mean much).

The inputs are the core benchmark's two mixes (core/benches/lifecycle.rs), written as traces:

    TURNSTILE_BENCH_WRITE=target/mixes cargo bench -p turnstile-core --bench lifecycle
    cargo build --release -p turnstile-driver
    python bindings/python/bench/bench.py target/mixes

Each row is the best of ``--reps`` runs; an event is one input handed to the engine with every
output it produced drained:

- Rust core: ``Engine::handle`` and ``poll_output`` in a Rust loop (the native module's
  ``time_core``), the baseline;
- Python, typed: ``Engine.handle`` with the typed input classes, ``poll_output`` decoding every
  output into its dataclass;
- Python, JSON dicts: ``handle`` with dicts, ``poll_output_json``;
- driver: the whole trace piped through ``turnstile-driver`` (one process: start-up, every line
  read and checked against the schema, every reply written).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from turnstile import Engine, _native
from turnstile.types import Input, input_from_json

ROOT = Path(__file__).resolve().parents[3]


def read(path: Path) -> Tuple[Dict[str, Any], List[Tuple[int, Dict[str, Any]]]]:
    lines = [json.loads(t) for t in path.read_text().splitlines() if t.strip()]
    header, rest = lines[0], lines[1:]
    return header, [(line["at"], line["input"]) for line in rest]


def best(reps: int, run: Callable[[], None]) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def python_typed(header: Dict[str, Any], inputs: List[Tuple[int, Input]]) -> None:
    engine = Engine(header.get("config"), header.get("start"))
    for at, value in inputs:
        engine.handle(at, value)
        while engine.poll_output() is not None:
            pass


def python_json(header: Dict[str, Any], inputs: List[Tuple[int, Dict[str, Any]]]) -> None:
    engine = Engine(header.get("config"), header.get("start"))
    for at, value in inputs:
        engine.handle(at, value)
        while engine.poll_output_json() is not None:
            pass


def driver(binary: str, path: Path) -> None:
    with path.open("rb") as stdin:
        subprocess.run([binary], stdin=stdin, stdout=subprocess.DEVNULL, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mixes", type=Path, help="the folder the core benchmark wrote")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--driver",
        default=os.environ.get(
            "TURNSTILE_DRIVER", str(ROOT / "target" / "release" / "turnstile-driver")
        ),
    )
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, best of {args.reps}")
    print(f"{'mix':<11} {'path':<20} {'events/s':>12} {'x core':>8}")
    for name in ("admission", "streaming"):
        path = args.mixes / f"{name}.jsonl"
        header, raw = read(path)
        typed = [(at, input_from_json(v)) for at, v in raw]
        n = len(raw)
        rows = [
            ("Rust core", _native.time_core(str(path), args.reps)),
            ("Python, typed", best(args.reps, lambda: python_typed(header, typed))),
            ("Python, JSON dicts", best(args.reps, lambda: python_json(header, raw))),
            ("driver (process)", best(args.reps, lambda: driver(args.driver, path))),
        ]
        core = rows[0][1]
        for label, seconds in rows:
            print(f"{name:<11} {label:<20} {n / seconds:>12,.0f} {seconds / core:>7.1f}x")


if __name__ == "__main__":
    main()
