"""UPID tasks: created by write endpoints, completed in simulated time.

A task runs for a simulated duration divided by the cluster's speed factor. Its effect (the
guest moves, the snapshot appears...) is applied only when it ends, exactly once, by
:func:`advance`, which the app calls before serving every request. A finish callback returns
``None`` for success or the error text, which becomes ``exitstatus`` and ``TASK ERROR: ...``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from pvesim.state import Cluster, Guest, Task

FAILURE_HOOK_KEY = "task_failures"


def make_upid(node: str, pid: int, pstart: int, starttime: int, ttype: str, tid: str, user: str) -> str:
    return f"UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{ttype}:{tid}:{user}:"


def start_task(
    cluster: Cluster,
    node: str,
    ttype: str,
    tid: str,
    user: str,
    duration: float,
    log: Iterable[str],
    finish: Callable[[], str | None],
    lock_guest: Guest | None = None,
    lock: str | None = None,
) -> Task:
    """Create a running task; ``lock_guest`` keeps ``lock`` set on the guest while it runs."""
    now = int(cluster.clock.now())
    cluster.next_pid += 1
    pid = cluster.next_pid
    pstart = 100_000 + pid
    upid = make_upid(node, pid, pstart, now, ttype, tid, user)
    if lock_guest is not None and lock:
        lock_guest.config["lock"] = lock

    def _finish() -> str | None:
        if lock_guest is not None and lock and lock_guest.config.get("lock") == lock:
            del lock_guest.config["lock"]
        injected = _injected_failure(cluster, ttype, tid)
        if injected:
            return injected
        return finish()

    task = Task(
        upid=upid,
        node=node,
        pid=pid,
        pstart=pstart,
        starttime=now,
        type=ttype,
        id=tid,
        user=user,
        log=list(log),
        done_at=time.monotonic() + max(duration, 0.0) / max(cluster.speed, 1e-6),
        finish=_finish,
    )
    cluster.tasks.append(task)
    return task


def _injected_failure(cluster: Cluster, ttype: str, tid: str) -> str | None:
    """Fault hook: scenario/control API may make tasks of a type (and id) fail."""
    for rule in cluster.options.get(FAILURE_HOOK_KEY, []):
        if rule.get("type") in (None, ttype) and str(rule.get("id", tid)) == tid:
            return str(rule.get("error", "simulated failure"))
    return None


def complete(cluster: Cluster, task: Task) -> None:
    error: str | None
    try:
        error = task.finish() if task.finish else None
    except Exception as exc:  # an effect that cannot apply ends the task in error, like a die in PVE
        error = str(exc)
    task.finish = None
    task.endtime = int(cluster.clock.now())
    task.done_at = None
    if error:
        task.status = error
        task.log.append(f"TASK ERROR: {error}")
    else:
        task.status = "OK"
        task.log.append("TASK OK")


def advance(cluster: Cluster) -> None:
    """Finish every task whose time has come (effects may start follow-up tasks)."""
    while True:
        now = time.monotonic()
        due = [t for t in cluster.tasks if t.running and t.done_at is not None and t.done_at <= now]
        if not due:
            return
        for task in sorted(due, key=lambda t: t.done_at or 0):
            complete(cluster, task)


def finish_all(cluster: Cluster) -> None:
    """Complete every running task now (control API, used by tests and the generator)."""
    while any(t.running for t in cluster.tasks):
        for task in [t for t in cluster.tasks if t.running]:
            complete(cluster, task)
