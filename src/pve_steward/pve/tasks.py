"""A row of PVE's task lists, read the one way: whether the task is still running."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# pve-manager PVE/API2/Tasks.pm node_tasks: a task of the active list that has not ended is sent with this status
RUNNING = "RUNNING"


def task_running(task: Mapping[str, Any]) -> bool:
    """A task that has not ended. /nodes/{node}/tasks (source active or all) sends it with status 'RUNNING'
    (Tasks.pm node_tasks); /cluster/tasks (pmxcfs tasklist, RESTEnvironment active_workers) leaves the status
    out. An ended task has its endtime and the status read from its log (pve-common UPID.pm read_status)."""
    return not task.get("endtime") and task.get("status") in (None, RUNNING)
