#!/usr/bin/env bash
# `turnstile-sim view` in a real browser: Debian's chromium, headless, driven by
# playwright-core (pinned, from npm), opens pages written from committed traces, a failing
# trace and a 100,000-input trace, saves a screenshot of each (test artefacts, in the target
# directory), and checks what they draw (sim/tests/view-browser/test.mjs). Installs chromium
# with apt-get when the machine has none. Bounded by timeouts.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing chromium"
  timeout 300 apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq chromium >/dev/null
fi
chromium --version
cargo build --locked -q -p turnstile-sim --bin turnstile-sim --example large_trace
TARGET="$(cd "$CARGO_TARGET_DIR" && pwd)"
SIM="$TARGET/debug/turnstile-sim"
OUT="$TARGET/view-browser"
rm -rf "$OUT"
mkdir -p "$OUT/pages" "$OUT/shots"
for t in fold-prefix-at-step-start-g09 subagent-cancel-cascades cancel-grace-timer-fires \
  shutdown-interrupts-everything-g20 cancel-run-exactly-one; do
  "$SIM" view "tests/traces/$t.jsonl" -o "$OUT/pages/$t.html" >/dev/null
done
# A failing trace: cancel-run-exactly-one expecting a completed run where the core cancels it.
sed '0,/"outcome":"cancelled"/s//"outcome":"completed"/' tests/traces/cancel-run-exactly-one.jsonl \
  >"$OUT/failing-cancel-run.jsonl"
"$SIM" view "$OUT/failing-cancel-run.jsonl" -o "$OUT/pages/failing-cancel-run.html" >/dev/null
"$TARGET/debug/examples/large_trace" 100000 "$OUT/large.jsonl"
"$SIM" view "$OUT/large.jsonl" -o "$OUT/pages/large.html"
cd sim/tests/view-browser
timeout 300 npm install --no-audit --no-fund --silent
CHROMIUM="$(command -v chromium)" timeout 600 node test.mjs "$OUT/pages" "$OUT/shots"
echo "screenshots: $OUT/shots"
