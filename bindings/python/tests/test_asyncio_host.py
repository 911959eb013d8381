"""The asyncio example host under concurrent callers: several tasks submit, cancel and clear on
three sessions while a slow tool runs; every RunId hears exactly one RunComplete, and the engine
ends with nothing unfinished."""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path
from typing import List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from asyncio_host import AsyncHost  # noqa: E402


async def scenario(seed: int) -> AsyncHost:
    rng = random.Random(seed)
    host = AsyncHost()
    sessions = ["a", "b", "c"]
    run_ids: List[str] = []

    async def client(n: int) -> None:
        for i in range(6):
            run_id = f"c{n}-{i}"
            run_ids.append(run_id)
            task = asyncio.create_task(host.submit(rng.choice(sessions), f"prompt {i}", run_id))
            if rng.random() < 0.3:
                await task  # some clients wait for their answer before the next prompt
            await asyncio.sleep(rng.random() * 0.02)

    async def disrupter() -> None:
        for _ in range(10):
            await asyncio.sleep(rng.random() * 0.03)
            session = rng.choice(sessions)
            if rng.random() < 0.5:
                await host.cancel(session)
            else:
                await host.clear(session)

    await asyncio.gather(*(client(n) for n in range(4)), disrupter())
    # Every submission ends by itself: the tools finish, the cancels and clears settle.
    pending = [w.future for ws in host.waiters.values() for w in ws]
    await asyncio.wait_for(asyncio.gather(*pending), timeout=20)
    assert sorted(host.run_completes) == sorted(run_ids), "every RunId heard a RunComplete"
    await host.shutdown()
    return host


@pytest.mark.parametrize("seed", range(8))
def test_every_run_hears_exactly_one_run_complete(seed: int) -> None:
    host = asyncio.run(asyncio.wait_for(scenario(seed), timeout=60))
    assert len(host.run_completes) == 24
    assert set(host.run_completes.values()) == {1}, host.run_completes
    assert host.engine.unfinished() == 0
    outcomes = set(host.outcomes.values())
    assert outcomes <= {"completed", "cancelled", "interrupted"}, outcomes
    assert "completed" in outcomes


def test_a_cancel_while_the_tool_runs_ends_both_runs_and_the_next_one_runs() -> None:
    async def go() -> None:
        host = AsyncHost()
        first = asyncio.create_task(host.submit("s", "List the files", "r1"))
        second = asyncio.create_task(host.submit("s", "And count them", "r2"))
        while not host.tools:  # the slow tool is running
            await asyncio.sleep(0.001)
        await host.cancel("s")
        assert (await first).outcome == "cancelled"
        assert (await second).outcome == "cancelled"
        third = await host.submit("s", "Try again", "r3")
        assert third.outcome == "completed"
        assert third.text == "Done."
        await host.shutdown()
        assert dict(host.run_completes) == {"r1": 1, "r2": 1, "r3": 1}

    asyncio.run(asyncio.wait_for(go(), timeout=30))
