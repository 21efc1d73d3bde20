"""Task read tools: recent tasks across the cluster, and one task's status and log."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from pve_steward.errors import PveError
from pve_steward.models import Model, Untrusted, iso
from pve_steward.pve.ids import NodeName, Upid, VmId, parse_upid
from pve_steward.pve.tasks import task_running
from pve_steward.pveio.client import api_path, gather
from pve_steward.pveio.client import node as node_seg
from pve_steward.pveio.client import upid as upid_seg
from pve_steward.security.guard import guarded
from pve_steward.tools.context import ToolContext

LOG_CAP = 5000


class TaskRow(Model):
    upid: Untrusted
    node: Untrusted
    type: str
    id: Untrusted = Field(description="object of the task, usually a vmid")
    user: Untrusted
    state: str = Field(description="running, ok, warning, failed, or unknown (the task log ended without a result)")
    exitstatus: Untrusted | None = Field(None, description="PVE's exit status text when finished")
    started: str | None
    ended: str | None = None
    duration_s: int | None = None


def task_row(r: dict[str, Any]) -> TaskRow:
    status = r.get("status")
    if task_running(r):
        state = "running"
    elif status == "OK":
        state = "ok"
    elif str(status).startswith("WARNINGS"):
        state = "warning"
    elif status == "unexpected status":  # log ended without a TASK line (PVE/UPID.pm normalize_status_type)
        state = "unknown"
    else:
        state = "failed"
    start, end = r.get("starttime"), r.get("endtime")
    return TaskRow(
        upid=r["upid"],
        node=r.get("node", ""),
        type=r.get("type", ""),
        id=str(r.get("id", "")),
        user=r.get("user", ""),
        state=state,
        exitstatus=None if state == "running" else status,
        started=iso(start),
        ended=iso(end),
        duration_s=int(end - start) if start is not None and end is not None else None,
    )


class TaskList(Model):
    total: int
    items: list[TaskRow]
    incomplete: list[str] = Field(default_factory=list)


@guarded(toolset="tasks")
async def list_tasks(
    t: ToolContext,
    node: NodeName | None = None,
    vmid: VmId | None = None,
    type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{1,31}$")] | None = None,
    errors_only: bool = False,
    since_hours: Annotated[float, Field(gt=0, le=24 * 31)] = 24,
    limit: Annotated[int, Field(ge=1, le=500)] = 50,
) -> TaskList:
    """Recent tasks, newest first; per-node history when a node is given, else every node's."""
    since = int(t.now() - since_hours * 3600)
    params: dict[str, Any] = {"since": since, "limit": LOG_CAP if not errors_only else 1000, "source": "all"}
    if errors_only:
        params["errors"] = True
    if vmid is not None:
        params["vmid"] = vmid
    if type:
        params["typefilter"] = type
    if node:
        nodes = [node]
    else:
        status = await t.client.get(api_path("cluster", "status"))
        nodes = [r["name"] for r in status if r.get("type") == "node" and r.get("online")]
    got = await gather(t.client, [(n, api_path("nodes", node_seg(n), "tasks"), params) for n in nodes])
    rows = [task_row(r) for n in nodes for r in _rows(got[n])]
    if errors_only:  # PVE's errors=1 keeps running tasks too (their status type is 'unknown', Tasks.pm node_tasks)
        rows = [r for r in rows if r.state != "running"]
    rows.sort(key=lambda r: (r.started or "", r.upid), reverse=True)
    incomplete = [f"{n}: {v.message}" for n, v in got.items() if isinstance(v, PveError)]
    return TaskList(total=len(rows), items=rows[:limit], incomplete=incomplete)


def _rows(answer: Any) -> list[dict[str, Any]]:
    return [] if isinstance(answer, PveError) else list(answer)


class TaskDetail(Model):
    task: TaskRow
    log_tail: list[Untrusted] = Field(description="last lines of the task log")
    log_lines: int
    incomplete: list[str] = Field(
        default_factory=list, description="reads that failed; the fields they would have filled are unknown"
    )


@guarded(toolset="tasks")
async def get_task(t: ToolContext, upid: Upid, log_lines: Annotated[int, Field(ge=0, le=1000)] = 50) -> TaskDetail:
    """A task's status and the end of its log; the node is read from the UPID.

    PVE's task status has no end time (pve-manager PVE/API2/Tasks.pm read_task_status); the task index
    row has it (node_tasks, ``endtime`` from the index line), so a finished task's row is read alongside,
    narrowed to its start second and type.
    """
    info = parse_upid(upid)
    node = api_path("nodes", node_seg(info.node), "tasks")
    base = api_path("nodes", node_seg(info.node), "tasks", upid_seg(upid))
    around = {"since": info.starttime, "until": info.starttime, "typefilter": info.type, "source": "all", "limit": 500}
    got = await gather(
        t.client,
        [
            ("status", base.join("status"), {}),
            ("log", base.join("log"), {"start": 0, "limit": LOG_CAP}),
            ("index", node, around),
        ],
    )
    status: dict[str, Any] = _required(got["status"])
    lines: list[dict[str, Any]] = _required(got["log"])
    row = dict(status)
    incomplete: list[str] = []
    if status.get("status") == "stopped":
        if isinstance(got["index"], PveError) and not status.get("endtime"):
            incomplete.append(f"end time: the task index could not be read ({got['index'].message})")
        row["status"] = status.get("exitstatus", "unknown")
        listed = next((r for r in _rows(got["index"]) if r.get("upid") == upid), {})
        row["endtime"] = status.get("endtime") or listed.get("endtime")
    else:
        row["status"] = None
    text = [str(line.get("t", "")) for line in lines]
    return TaskDetail(
        task=task_row(row), log_tail=text[-log_lines:] if log_lines else [], log_lines=len(text), incomplete=incomplete
    )


def _required(answer: Any) -> Any:
    if isinstance(answer, PveError):
        raise answer
    return answer


class TaskLog(Model):
    upid: Untrusted
    start: int
    lines: list[Untrusted]
    total: int = Field(description="lines in the whole log")
    next_start: int | None = Field(None, description="pass as start to read on; null at the end")


@guarded(toolset="tasks")
async def task_log(
    t: ToolContext,
    upid: Upid,
    start: Annotated[int, Field(ge=0)] = 0,
    limit: Annotated[int, Field(ge=1, le=LOG_CAP)] = 200,
) -> TaskLog:
    """A window of a task's log (PVE pages it by line number), for logs too long for get_task."""
    info = parse_upid(upid)
    path = api_path("nodes", node_seg(info.node), "tasks", upid_seg(upid), "log")
    rows: list[dict[str, Any]] = await t.client.get(path, start=0, limit=LOG_CAP)
    text = [str(r.get("t", "")) for r in rows]
    window = text[start : start + limit]
    end = start + len(window)
    return TaskLog(upid=upid, start=start, lines=window, total=len(text), next_start=end if end < len(text) else None)
