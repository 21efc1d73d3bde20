"""Heavy operations share a budget; a caller over it is told to retry, and heavy reads yield to cheap ones."""

from __future__ import annotations

from collections.abc import Awaitable

import anyio
import pytest

from pve_steward.pveio.admission import KEPT_RUNS, Admission, Busy
from pve_steward.pveio.requestpool import BACKGROUND, REQUEST_PRIORITY, URGENT

pytestmark = pytest.mark.anyio


async def test_at_most_limit_heavy_calls_run_at_once() -> None:
    admission = Admission(limit=2, wait=10)
    peak = 0

    async def work() -> int:
        nonlocal peak
        peak = max(peak, admission.running)
        await anyio.sleep(0.01)
        return REQUEST_PRIORITY.get()

    priorities: list[int] = []

    async def one() -> None:
        priorities.append(await admission.run("check_cluster_health", object(), work))

    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(one)
    assert peak == 2
    assert priorities == [BACKGROUND] * 6, "a heavy call's reads queue behind cheap calls'"
    assert REQUEST_PRIORITY.get() == URGENT and admission.running == 0


async def test_a_caller_that_gets_no_slot_in_time_is_told_to_retry() -> None:
    admission = Admission(limit=1, wait=0.05, typical_seconds=7.2)
    release = anyio.Event()

    async def hold() -> None:
        await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(admission.run, "plan_node_evacuation", "a", hold)
        await anyio.sleep(0.01)
        with pytest.raises(Busy) as refused:
            await admission.run("check_cluster_health", "b", hold)
        release.set()
    message = str(refused.value)
    assert "busy" in message and "at most 1 at once" in message
    assert "retry check_cluster_health in about 8 s" in message


async def test_a_failing_heavy_call_gives_its_slot_back() -> None:
    admission = Admission(limit=1, wait=0.05)

    async def fail() -> None:
        raise ValueError("boom")

    for _ in range(3):
        with pytest.raises(ValueError):
            await admission.run("diagnose_backups", "c", fail)
    assert admission.running == 0


async def test_callers_asking_what_is_already_running_share_that_run() -> None:
    admission = Admission(limit=1, wait=0.05)
    runs = 0

    async def work() -> str:
        nonlocal runs
        runs += 1
        await anyio.sleep(0.2)  # longer than the wait: a joiner needs no slot
        return "report"

    results: list[str] = []

    async def ask() -> None:
        results.append(await admission.run("check_cluster_health", ("check_cluster_health", ()), work))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(ask)
    assert results == ["report"] * 5 and runs == 1 and admission.joined == 4


def test_kept_runs_expire_and_only_the_latest_are_kept() -> None:
    now = [100.0]
    admission = Admission(kept_seconds=10, clock=lambda: now[0])
    for i in range(KEPT_RUNS + 1):
        admission.keep(("health", i), f"report {i}")
    assert admission.kept(("health", 0)) is None, "the oldest gave way"
    assert admission.kept(("health", 1)) == "report 1"
    admission.keep(("health", 1), "report 1 again")  # a new first page replaces the kept run
    now[0] += 10
    assert admission.kept(("health", 1)) == "report 1 again"
    now[0] += 0.5
    assert admission.kept(("health", 1)) is None, "past kept_seconds a later page runs again"
    assert admission.continued == 2


async def test_a_later_page_joins_a_newer_run_of_its_work_rather_than_the_kept_one() -> None:
    from types import SimpleNamespace

    from pve_steward.pveio.admission import heavy

    admission = Admission(limit=2, wait=1)
    started, release = anyio.Event(), anyio.Event()
    runs: list[int] = []

    async def report(t: object, page: int = 0) -> list[int]:
        runs.append(len(runs))
        if len(runs) == 2:  # the second run: a new first page, still going while page 2 is asked for
            started.set()
            await release.wait()
        return [len(runs)] * 3

    handler = heavy(presentation=("page",), present=lambda t, r, a: [*r, a["page"]], continues=lambda a: a["page"] > 0)(
        report
    )
    t = SimpleNamespace(app=SimpleNamespace(admission=admission, cluster=None), op=SimpleNamespace(name="health"))
    assert await handler(t, page=0) == [1, 1, 1, 0]
    assert await handler(t, page=1) == [1, 1, 1, 1], "from the kept run"
    answers: list[list[int]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _collect(answers, handler(t, page=0)))
        await started.wait()
        tg.start_soon(lambda: _collect(answers, handler(t, page=2)))
        await anyio.sleep(0.01)
        release.set()
    assert sorted(answers) == [[2, 2, 2, 0], [2, 2, 2, 2]] and len(runs) == 2, "page 2 joined the newer run"
    assert admission.continued == 1 and admission.joined == 1


async def _collect(into: list[list[int]], call: Awaitable[list[int]]) -> None:
    into.append(await call)


async def test_callers_sharing_a_run_get_one_object_per_page_they_ask_for() -> None:
    """Fifty callers of one run asking for its first page: one page presented, one object (so its answer is
    encoded once, answers.py); another page is presented once for its own callers."""
    from types import SimpleNamespace

    from pydantic import BaseModel

    from pve_steward.pveio.admission import heavy

    class Whole(BaseModel):
        rows: list[int]

    class Shown(BaseModel):
        rows: list[int]
        offset: int

    presented: list[int] = []

    def present(t: object, whole: Whole, arguments: dict[str, int]) -> Shown:
        presented.append(arguments["offset"])
        return Shown(rows=whole.rows[arguments["offset"] :][:2], offset=arguments["offset"])

    async def report(t: object, offset: int = 0) -> Whole:
        await anyio.sleep(0.05)  # long enough for every caller to join
        return Whole(rows=list(range(10)))

    handler = heavy(presentation=("offset",), present=present)(report)
    t = SimpleNamespace(app=SimpleNamespace(admission=Admission(), cluster=None), op=SimpleNamespace(name="health"))
    got: list[tuple[int, Shown]] = []

    async def ask(offset: int) -> None:
        got.append((offset, await handler(t, offset=offset)))

    async with anyio.create_task_group() as tg:
        for offset in [0] * 5 + [2] * 2:
            tg.start_soon(ask, offset)
    firsts = {id(shown) for offset, shown in got if offset == 0}
    seconds = {id(shown) for offset, shown in got if offset == 2}
    assert len(got) == 7 and len(firsts) == 1 and len(seconds) == 1 and firsts != seconds
    assert sorted(presented) == [0, 2], "each page presented once"
    assert next(s.rows for o, s in got if o == 2) == [2, 3]
