"""Background work gives way to cheap calls: requests not started, answers held, for a bounded time.

The request pool runs plain functions here (no proxmoxer): what is tested is the ordering and the
bound, with generous waits, never a duration.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pytest

from pve_steward.config import load_settings
from pve_steward.pveio.requestpool import BACKGROUND, URGENT, RequestPool
from pve_steward.pveio.urgency import Urgency
from pve_steward.server import OpsServer, build_server
from pve_steward.testing import FakeClient


def test_give_way_returns_at_once_when_no_cheap_call_runs() -> None:
    urgency = Urgency(grace=60)
    urgency.give_way()  # would hang the test for a minute if it waited
    assert not urgency.holding()


def test_a_background_thread_waits_until_the_cheap_call_ends() -> None:
    urgency = Urgency(grace=60)
    passed = threading.Event()

    def background() -> None:
        urgency.give_way()
        passed.set()

    with urgency.urgent():
        worker = threading.Thread(target=background)
        worker.start()
        assert not passed.wait(0.2), "background work went on while a cheap call ran"
    assert passed.wait(10), "background work did not resume when the cheap call ended"
    worker.join()


def test_a_cheap_call_holds_background_work_for_its_grace_at_most() -> None:
    urgency = Urgency(grace=0.05)
    passed = threading.Event()
    with urgency.urgent():  # a "cheap" call that runs long loses its precedence
        worker = threading.Thread(target=lambda: (urgency.give_way(), passed.set()))
        worker.start()
        assert passed.wait(10), "background work starved behind a long call"
    worker.join()


def test_when_clear_runs_the_callback_once_the_cheap_calls_end() -> None:
    urgency = Urgency(grace=60)
    ran: list[str] = []
    assert urgency.when_clear(lambda: ran.append("now")) == 0.0 and ran == [], "clear: the caller runs it itself"
    with urgency.urgent():
        with urgency.urgent():
            assert urgency.when_clear(lambda: ran.append("later")) > 0
        assert ran == [], "one cheap call still runs"
    assert ran == ["later"]


def test_the_pool_starts_no_background_request_while_a_cheap_call_runs_but_starts_urgent_ones() -> None:
    urgency = Urgency(grace=60)
    pool = RequestPool(1, urgency)
    started: list[str] = []
    try:
        with urgency.urgent():
            heavy = pool.submit(started.append, "heavy", priority=BACKGROUND)
            cheap = pool.submit(started.append, "cheap", priority=URGENT)
            cheap.result(10)
            assert not heavy.done() and started == ["cheap"]
        heavy.result(10)
        assert started == ["cheap", "heavy"]
    finally:
        pool.shutdown()


def _parked(pool: RequestPool) -> int:
    """The pool's workers waiting for a background slot (in ``Condition.wait`` under ``_take_slot``)."""
    frames = sys._current_frames()
    parked = 0
    for worker in pool._workers:
        codes, frame = set(), frames.get(worker.ident or -1)
        while frame is not None:
            codes.add(frame.f_code)
            frame = frame.f_back
        parked += {RequestPool._take_slot.__code__, threading.Condition.wait.__code__} <= codes
    return parked


def _most_in_flight(pool: RequestPool, jobs: int, parked: int = 0) -> int:
    """Submit ``jobs`` background requests that block until released; the most that ran at once, once every
    job was taken from the queue and all but ``parked`` run while ``parked`` workers wait for a slot
    (polled, 10 s at most: only against a hang; a pool that lets more run never gets there)."""
    lock, release = threading.Lock(), threading.Event()
    running, most = [0], [0]

    def blocked() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1

    futures = [pool.submit(blocked, priority=BACKGROUND) for _ in range(jobs)]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if pool._queue.empty() and running[0] == jobs - parked and _parked(pool) == parked:
            break
        time.sleep(0.001)
    seen = most[0]
    release.set()
    for f in futures:
        f.result(10)
    return seen


def test_while_cheap_calls_come_only_half_the_workers_send_background_requests() -> None:
    urgency = Urgency(grace=60)
    pool = RequestPool(4, urgency)
    try:
        with urgency.urgent():
            pass  # a cheap call just ended: more may come within its grace
        assert urgency.coming() and not urgency.holding()
        assert pool.background_cap == 2
        assert _most_in_flight(pool, 4, parked=2) == 2  # the next cheap call's reads find fewer ahead of them
    finally:
        pool.shutdown()


def test_without_cheap_calls_every_worker_sends_background_requests() -> None:
    urgency = Urgency(grace=60)
    pool = RequestPool(4, urgency)
    try:
        assert not urgency.coming()
        assert _most_in_flight(pool, 4) == 4
    finally:
        pool.shutdown()


def test_a_background_request_waits_for_a_slot_one_grace_at_most() -> None:
    urgency = Urgency(grace=0.05)
    pool = RequestPool(2, urgency)  # one background slot while cheap calls come
    started, release, second = threading.Event(), threading.Event(), threading.Event()
    try:
        with urgency.urgent():  # a cheap call that runs on: cheap calls keep "coming" the whole time
            first = pool.submit(lambda: (started.set(), release.wait(60)), priority=BACKGROUND)
            assert started.wait(10)  # it holds the one slot
            pool.submit(second.set, priority=BACKGROUND)
            assert second.wait(10), "a background request starved behind a full slot"
        release.set()
        first.result(10)
    finally:
        pool.shutdown()


def test_background_answers_are_held_while_a_cheap_call_runs_and_urgent_ones_are_not() -> None:
    urgency = Urgency(grace=60)
    pool = RequestPool(2, urgency)
    release = threading.Event()
    heavy_started, heavy_answered = threading.Event(), threading.Event()

    def slow(name: str) -> str:
        if name == "heavy":
            heavy_started.set()
        release.wait(10)
        if name == "heavy":
            heavy_answered.set()
        return name

    async def run() -> None:
        heavy = asyncio.ensure_future(pool.run(slow, "heavy", priority=BACKGROUND))
        # the background request has started before the cheap call (taken inside it, it would give way)
        assert await asyncio.to_thread(heavy_started.wait, 10)
        with urgency.urgent():
            cheap = asyncio.ensure_future(pool.run(slow, "cheap", priority=URGENT))
            release.set()
            assert await asyncio.wait_for(cheap, 10) == "cheap"
            assert await asyncio.to_thread(heavy_answered.wait, 10)
            for _ in range(20):  # the background answer has reached the loop, and stays held
                await asyncio.sleep(0.01)
            assert not heavy.done(), "a background answer resumed heavy work during a cheap call"
        assert await asyncio.wait_for(heavy, 10) == "heavy"

    try:
        asyncio.run(run())
    finally:
        pool.shutdown()


def test_the_server_marks_every_call_cheap_except_the_heavy_operations(tmp_path: Path) -> None:
    """Meta-tools name the operation in ``action``; granular tools are named for it."""
    for granular in (False, True):
        settings = load_settings(url="pve.invalid:8006", granular_tools=granular, audit_log=tmp_path / "audit.jsonl")
        mcp = build_server(settings, client=FakeClient())
        assert isinstance(mcp, OpsServer)
        assert {"check_cluster_health", "plan_node_evacuation"} <= mcp.heavy
        if granular:
            assert not mcp.cheap("check_cluster_health", {"limit": 5})
            assert mcp.cheap("get_guest", {"vmid": 100})
        else:
            assert not mcp.cheap("diagnostics", {"action": "check_cluster_health"})
            assert mcp.cheap("guests", {"action": "get_guest", "vmid": 100})
            assert mcp.cheap("guests", {})  # no action: refused as a cheap call, never held as heavy


def test_a_mark_inside_a_marked_task_is_the_same_cheap_call() -> None:
    """An HTTP request marked on arrival stays one cheap call when its tool marks itself again."""
    urgency = Urgency(grace=60)
    with urgency.urgent():
        with urgency.urgent():
            pass
        assert urgency.holding(), "the inner mark ended the outer one"
    assert not urgency.holding()


def test_a_task_that_turns_out_heavy_releases_its_mark() -> None:
    urgency = Urgency(grace=60)
    with urgency.urgent():
        assert urgency.holding()
        urgency.release()  # what a heavy tool call does with the mark its HTTP request got
        assert not urgency.holding()
        urgency.give_way()  # returns at once: nothing holds background work back
    assert not urgency.holding()


def test_answers_for_a_closed_event_loop_are_not_kept() -> None:
    pool = RequestPool(1, Urgency(grace=60))
    release = threading.Event()

    async def start() -> asyncio.Future[Any]:
        return asyncio.ensure_future(pool.run(release.wait, 10))

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(start())
    finally:
        loop.close()  # the caller's loop ends while its request runs
    release.set()
    pool.submit(lambda: None).result(10)  # the worker has finished the request by now
    try:
        assert not pool._answered and not pool._held
    finally:
        pool.shutdown()


@pytest.mark.anyio
async def test_a_heavy_turn_waits_for_the_cheap_call_in_flight_and_heavy_turns_go_one_at_a_time() -> None:
    urgency = Urgency(grace=60)
    order: list[str] = []
    cheap_started, cheap_may_end = asyncio.Event(), asyncio.Event()

    async def cheap() -> None:
        with urgency.urgent():
            cheap_started.set()
            await cheap_may_end.wait()
            order.append("cheap")

    async def heavy(name: str) -> None:
        await urgency.heavy_turn()
        order.append(name)

    cheap_task = asyncio.create_task(cheap())
    await cheap_started.wait()
    heavies = [asyncio.create_task(heavy(f"heavy {i}")) for i in range(3)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert order == [], "no heavy call goes while the cheap one runs"
    cheap_may_end.set()
    await asyncio.wait_for(asyncio.gather(cheap_task, *heavies), 30)
    assert order == ["cheap", "heavy 0", "heavy 1", "heavy 2"]


@pytest.mark.anyio
async def test_a_heavy_turn_waits_one_grace_at_most() -> None:
    urgency = Urgency(grace=0.05)
    never = asyncio.Event()

    async def stuck_cheap() -> None:
        with urgency.urgent():
            await never.wait()

    stuck = asyncio.create_task(stuck_cheap())
    await asyncio.sleep(0)
    await asyncio.wait_for(urgency.heavy_turn(), 30)  # a cheap call that never ends does not starve heavy work
    stuck.cancel()


@pytest.mark.anyio
async def test_http_marks_cheap_calls_on_arrival_and_lets_a_heavy_one_wait_its_turn_unmarked() -> None:
    """http.Precedence reads a tools/call's body before the SDK does: a heavy operation is not a cheap call,
    and the SDK still reads the body as it arrived."""
    import json

    from pve_steward.pveio.urgency import URGENCY
    from pve_steward.serving.http import Precedence

    seen: list[tuple[bool, bytes]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        seen.append((URGENCY.holding(), message["body"]))

    def heavy_only(name: str, arguments: dict[str, Any]) -> bool:
        return arguments.get("action") != "check_cluster_health"

    middleware = Precedence(app, heavy_only)

    def call(action: str) -> bytes:
        params = {"name": "diagnostics", "arguments": {"action": action}}
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()

    discover = b'{"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}}'
    bodies = (call("check_cluster_health"), call("get_guest"), b"not json", b'{"method": "tools/list"}', discover)
    for body in bodies:

        async def receive(body: bytes = body) -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        await middleware({"type": "http", "method": "POST"}, receive, None)
    assert seen == [
        (False, call("check_cluster_health")),
        (True, call("get_guest")),
        (True, b"not json"),
        (True, b'{"method": "tools/list"}'),
        (False, discover),  # a handshake gives way to the tool calls in flight, as a heavy call does
    ]


@pytest.mark.anyio
async def test_a_heavy_request_holds_the_lane_until_its_step_ends() -> None:
    """Fifty answers of one run, each 2-5 ms of the event loop, ran interleaved between a cheap call's steps:
    now each holds the lane from its turn until its step ends (the answer written, or the call parked)."""
    urgency = Urgency(grace=60)
    order: list[str] = []
    holding, may_end = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        with urgency.heavy_request() as step:
            await urgency.heavy_turn()
            await urgency.heavy_turn()  # its own second turn while it holds the lane: no wait
            order.append("first")
            holding.set()
            await may_end.wait()
            order.append("first ends")
            step.end()
            await asyncio.sleep(0)
            order.append("first returns")

    async def second() -> None:
        with urgency.heavy_request():
            await urgency.heavy_turn()
            order.append("second")

    one = asyncio.create_task(first())
    await holding.wait()
    two = asyncio.create_task(second())
    for _ in range(20):
        await asyncio.sleep(0)
    assert order == ["first"], "the second step waits while the first holds the lane"
    may_end.set()
    await asyncio.wait_for(asyncio.gather(one, two), 30)
    assert order == ["first", "first ends", "second", "first returns"]


@pytest.mark.anyio
async def test_a_parked_call_frees_the_lane_and_a_held_step_ends_after_one_grace() -> None:
    urgency = Urgency(grace=0.05)
    parked, never = asyncio.Event(), asyncio.Event()

    async def parks() -> None:
        with urgency.heavy_request():
            await urgency.heavy_turn()
            urgency.parked()  # it waits on its run now (link.call, admission)
            parked.set()
            await never.wait()

    async def holds() -> None:
        with urgency.heavy_request():
            await urgency.heavy_turn()
            await never.wait()  # a step that never ends (a client that stopped reading its answer)

    waiting = [asyncio.create_task(parks())]
    await parked.wait()
    await asyncio.wait_for(urgency.heavy_turn(), 0.04)  # less than the grace: the lane was free
    waiting.append(asyncio.create_task(holds()))
    await asyncio.sleep(0)
    await asyncio.wait_for(urgency.heavy_turn(), 30)  # the held lane is given up after one grace
    for task in waiting:
        task.cancel()


@pytest.mark.anyio
async def test_http_ends_a_heavy_step_when_its_response_is_written() -> None:
    """http.Precedence holds the lane for a heavy request until its last body message is sent, not longer."""
    import json

    from pve_steward.serving.http import Precedence

    entered: list[str] = []
    answer_now, may_return = asyncio.Event(), asyncio.Event()
    heavy = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "diagnostics", "arguments": {}}}
    ).encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        entered.append(scope["path"])
        if scope["path"] == "/first":
            await answer_now.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}", "more_body": False})
            await may_return.wait()

    middleware = Precedence(app, lambda name, arguments: False)

    async def request(path: str) -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": heavy, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            pass

        await middleware({"type": "http", "method": "POST", "path": path}, receive, send)

    first = asyncio.create_task(request("/first"))
    for _ in range(5):
        await asyncio.sleep(0)
    second = asyncio.create_task(request("/second"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert entered == ["/first"], "the second heavy request waits while the first's step holds the lane"
    answer_now.set()
    await asyncio.wait_for(second, 30)  # the first's answer is written: its step is over, though it runs on
    assert entered == ["/first", "/second"] and not first.done()
    may_return.set()
    await asyncio.wait_for(first, 30)


class _Answer:
    """An answer the test can watch for (a weak reference says when nothing keeps it)."""


def test_an_idle_worker_keeps_nothing_of_its_last_request() -> None:
    """A worker's loop kept its last ticket, the ticket its future, the future the answer: at 2,000 guests
    one decoded /cluster/resources (2 MB) per idle thread, for as long as the thread idled."""
    pool = RequestPool(2, Urgency(grace=60))

    async def ask() -> weakref.ref[_Answer]:
        answer = await pool.run(_Answer, priority=URGENT)
        return weakref.ref(answer)

    try:
        answered = asyncio.run(ask())
        gone = pool.submit(_Answer).result(10)
        watched = weakref.ref(gone)
        del gone
        for _ in range(100):  # the workers hand the answers over, then wait for the next request
            gc.collect()
            if answered() is None and watched() is None:
                break
            time.sleep(0.01)
        assert answered() is None, "an idle worker still holds the answer of its last run()"
        assert watched() is None, "an idle worker still holds the answer of its last submit()"
    finally:
        pool.shutdown()
