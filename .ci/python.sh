#!/usr/bin/env bash
# The core from Python and from any language (SPEC 12): the Python package's wheel built with
# maturin (pinned, from PyPI), installed with pip into a fresh virtualenv, and tested there with
# pytest (every recorded trace replayed through the package and through the process driver,
# the typed classes, the errors, the flight recorder, hypothesis side by side with the driver,
# the asyncio example host), mypy --strict over the typed layer and the example; then the Node
# example host over the process driver (`node --test`), and the bindings' benchmark once
# (a smoke run: its figures are docs/performance.md's, measured by hand).
#
# Environment: CARGO_TARGET_DIR (as .ci/run sets it; the build tools' virtualenv is kept there).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0
HYPOTHESIS_VERSION=6.170.27
MYPY_VERSION=2.4.1

# Absolute: maturin runs from bindings/python, and a relative target would be a second one.
TARGET="${CARGO_TARGET_DIR:-target}"
TARGET="$(mkdir -p "$TARGET" && cd "$TARGET" && pwd)"
export CARGO_TARGET_DIR="$TARGET"

source .ci/venv.sh

# The build tools, reused while the pins are the same.
TOOLS="$TARGET/python-tools-$MATURIN_VERSION-$MYPY_VERSION"
kept_venv "$TOOLS" "maturin==$MATURIN_VERSION" "mypy==$MYPY_VERSION"

SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT

# The wheel, as a user builds it (README: "From Python").
(cd bindings/python && "$TOOLS/bin/maturin" build --release --locked -q -o "$SCRATCH/wheels")
WHEEL="$(ls "$SCRATCH"/wheels/turnstile-*-abi3-*.whl)"
echo "built $(basename "$WHEEL")"

# A fresh virtualenv with nothing but the wheel and the test tools: the tests import the
# installed package, never the source tree.
new_venv "$SCRATCH/venv"
timeout 600 "$SCRATCH/venv/bin/pip" install -q --disable-pip-version-check "$WHEEL" \
  "pytest==$PYTEST_VERSION" "hypothesis==$HYPOTHESIS_VERSION"
"$SCRATCH/venv/bin/python" -c 'import turnstile, sys; print("installed", turnstile.__file__)' \
  | grep -q "$SCRATCH/venv" || { echo "the tests would not import the installed wheel"; exit 1; }

# The process driver the side-by-side tests and the Node example run.
cargo build --locked -q -p turnstile-driver
export TURNSTILE_DRIVER="$TARGET/debug/turnstile-driver"

(cd "$SCRATCH" && "$SCRATCH/venv/bin/python" -m pytest -q -p no:cacheprovider \
  "$ROOT/bindings/python/tests")

# The typed layer and the example, strictly (mypy reads the installed package's stubs).
"$TOOLS/bin/mypy" --strict --cache-dir "$SCRATCH/mypy-cache" \
  bindings/python/python/turnstile bindings/python/examples/asyncio_host.py \
  bindings/python/tools/gen_types.py

# The example users run.
"$SCRATCH/venv/bin/python" bindings/python/examples/asyncio_host.py

# The Node example host over the driver (Node's own test runner, no npm packages).
node --test examples/node-host/

# The bindings' benchmark, once, on the core benchmark's mixes.
TURNSTILE_BENCH_WRITE="$SCRATCH/mixes" cargo bench --locked -q -p turnstile-core --bench lifecycle
cargo build --locked -q --release -p turnstile-driver
"$SCRATCH/venv/bin/python" bindings/python/bench/bench.py "$SCRATCH/mixes" --reps 1 \
  --driver "$TARGET/release/turnstile-driver"
