#!/usr/bin/env bash
# The running server against its OpenAPI document: schemathesis (from PyPI, pinned, in a
# virtualenv) drives a live `turnstile serve` on 127.0.0.1 through every operation of
# adapters/server/src/openapi.json, the event stream included, and fails on a 5xx, a status,
# a media type, a header or a body (an SSE event's too) the document does not allow, a
# request the document says is invalid that is accepted, or a route that ignores the token.
# (The document is read from the file, which the server serves as it is: schemathesis would
# leave out the operation it loaded a document from.) The server's provider is a closed port
# on 127.0.0.1, so prompts are accepted and their runs fail by themselves; nothing leaves the
# machine but the install from PyPI. Everything is bounded by timeouts, and the server is
# stopped (SIGTERM, then SIGKILL) however the script ends.
#
# Environment: CARGO_TARGET_DIR (as .ci/run sets it; the virtualenv is kept there too),
# SCHEMATHESIS_SEED (the generation seed; fixed by default so that a failure reproduces),
# SCHEMATHESIS_MAX_EXAMPLES (per operation and phase; 40 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

SCHEMATHESIS_VERSION=4.32.5
SEED="${SCHEMATHESIS_SEED:-20261201}"
MAX_EXAMPLES="${SCHEMATHESIS_MAX_EXAMPLES:-40}"
TOKEN="ci-schemathesis-token-0123456789"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}"
cargo build --locked -q -p turnstile
TARGET="$(cd "$CARGO_TARGET_DIR" && pwd)"
BIN="$TARGET/debug/turnstile"

# The virtualenv, reused while the pinned version is the same.
source .ci/venv.sh
VENV="$TARGET/schemathesis-$SCHEMATHESIS_VERSION"
kept_venv "$VENV" "schemathesis==$SCHEMATHESIS_VERSION"
"$VENV/bin/schemathesis" --version

free_port() {
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

SCRATCH="$(mktemp -d)"
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

PORT="$(free_port)"
CLOSED="$(free_port)" # nobody listens there: the provider's connections are refused
cat >"$SCRATCH/turnstile.toml" <<EOF
model = "ci/none"

[providers.ci]
api = "openai-chat"
base_url = "http://127.0.0.1:$CLOSED/v1"
api_key_env = "TURNSTILE_CI_PROVIDER_KEY"
EOF

(
  cd "$SCRATCH"
  exec env TURNSTILE_SERVER_TOKEN="$TOKEN" TURNSTILE_CI_PROVIDER_KEY=dummy \
    "$BIN" --config "$SCRATCH/turnstile.toml" serve --listen "127.0.0.1:$PORT"
) >"$SCRATCH/serve.log" 2>&1 &
SERVER_PID=$!
BASE="http://127.0.0.1:$PORT"

# One request, without curl (a new machine has python3, not necessarily curl): the body on
# stdout; a failure (no answer, or not 2xx) exits 1.
http() {
  python3 - "$1" "$BASE$2" "${3:-}" "$TOKEN" <<'PY'
import sys, urllib.request
method, url, body, token = sys.argv[1:5]
request = urllib.request.Request(
    url, data=body.encode() if body else None, method=method,
    headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=10) as answer:
        sys.stdout.buffer.write(answer.read())
except Exception as e:
    print(e, file=sys.stderr)
    sys.exit(1)
PY
}

server_log() {
  echo "--- the server's output"
  cat "$SCRATCH/serve.log"
}

up=""
for _ in $(seq 100); do
  if http GET /v1/health >/dev/null 2>&1; then
    up=1
    break
  fi
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.2
done
if [ -z "$up" ]; then
  echo "turnstile serve did not answer /v1/health within 20 s"
  server_log
  exit 1
fi

# The document served is the file.
http GET /v1/openapi.json | cmp -s - adapters/server/src/openapi.json || {
  echo "GET /v1/openapi.json is not adapters/server/src/openapi.json"
  exit 1
}

# Something for the operations on sessions, runs and messages to find; the run fails by
# itself (after its retries) while schemathesis goes on.
http POST /v1/sessions/ci/prompts '{"prompt": "hello", "run_id": "ci-run"}' >/dev/null

cd "$SCRATCH"
status=0
SCHEMATHESIS_HOOKS="$ROOT/.ci/schemathesis_hooks.py" timeout 600 \
  "$VENV/bin/schemathesis" --config-file "$ROOT/.ci/schemathesis.toml" \
  run "$ROOT/adapters/server/src/openapi.json" \
  --url "$BASE" \
  --header "Authorization: Bearer $TOKEN" \
  --checks all --exclude-checks positive_data_acceptance \
  --max-examples "$MAX_EXAMPLES" \
  --seed "$SEED" \
  --workers 2 \
  --request-timeout 10 \
  --generation-database none \
  --no-color || status=$?
if [ "$status" -ne 0 ]; then
  echo "schemathesis failed (exit $status); reproduce with SCHEMATHESIS_SEED=$SEED"
  server_log
  exit 1
fi

# A clean shutdown: SIGTERM ends the runs still retrying `interrupted`, then the process.
kill -TERM "$SERVER_PID"
if ! timeout 30 tail --pid="$SERVER_PID" -f /dev/null; then
  echo "turnstile serve did not stop within 30 s of SIGTERM"
  server_log
  exit 1
fi
wait "$SERVER_PID" || {
  echo "turnstile serve exited with status $? after SIGTERM"
  server_log
  exit 1
}
SERVER_PID=""
