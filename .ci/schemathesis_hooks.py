"""schemathesis hooks of .ci/schemathesis.sh.

`GET /v1/runs/{run_id}/wait` is a long poll: on a run that is not finished it answers only
after `timeout_ms` (30 s without it, up to the server's limit of 300 s). The runs of the CI
server fail by themselves, but only after their retries (5 + 10 + 20 s), so a generated
`timeout_ms` is capped, and one is set where the case has none, to keep every request short.
Values the server must refuse (not a number, above 2^64 - 1) are sent as generated.
"""

import schemathesis

WAIT = "/v1/runs/{run_id}/wait"
CAP_MS = 300
U64_MAX = 2**64 - 1


def _capped(value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        number = int(value)
    elif isinstance(value, int):
        number = value
    else:
        return value
    if number > U64_MAX or number <= CAP_MS:
        return value
    return CAP_MS


@schemathesis.hook
def before_call(context, case, kwargs):
    if case.operation.path != WAIT:
        return
    if case.query is None:
        case.query = {}
    if isinstance(case.query, dict):
        case.query["timeout_ms"] = _capped(case.query.get("timeout_ms", CAP_MS))
