"""Progress during a write is the PVE task's own, when its log states a percentage; never an invented total."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pve_steward.config import load_settings
from pve_steward.security.audit import AuditLog
from pve_steward.security.tokens import TokenSigner
from pve_steward.surface.registry import load_registry
from pve_steward.testing import FakeClient
from pve_steward.tools.context import AppContext, ToolContext
from pve_steward.tools.twophase import follow_task, task_percent

pytestmark = pytest.mark.anyio

UPID = "UPID:pve1:0001A2B3:0012C4D5:675A1B2C:vzdump:104:ops@pve!mcp:"

# Lines as PVE's vzdump writes them (PVE/VZDump/QemuServer.pm) and as a drive mirror reports
# (qemu-server PVE/QemuServer/BlockJob.pm); the others carry no percentage.
VZDUMP_LOG = [
    "INFO: starting new backup job: vzdump 104 --storage local --mode snapshot --node pve1",
    "INFO: Starting Backup of VM 104 (qemu)",
    "INFO: started backup task 'f1d2c3b4-aaaa-bbbb-cccc-0123456789ab'",
    "INFO:   3% (1.0 GiB of 32.0 GiB) in 3s, read: 341.3 MiB/s, write: 98.2 MiB/s",
    "INFO:  41% (13.2 GiB of 32.0 GiB) in 36s, read: 375.4 MiB/s, write: 101.0 MiB/s",
    "INFO: 100% (32.0 GiB of 32.0 GiB) in 1m 20s, read: 409.6 MiB/s, write: 102.4 MiB/s",
    "INFO: Finished Backup of VM 104 (00:01:21)",
]


def test_task_percent_reads_pve_log_lines() -> None:
    assert task_percent(VZDUMP_LOG[:4]) == 3.0
    assert task_percent(VZDUMP_LOG[:5]) == 41.0
    assert task_percent(VZDUMP_LOG) == 100.0
    assert task_percent(["drive-scsi0: transferred 1.0 GiB of 32.0 GiB (3.12%) in 2s"]) == 3.12
    assert task_percent(["starting migration of VM 100 to node 'pve2' (10.0.0.2)", "migration status: active"]) is None
    assert task_percent(["INFO: Backup job finished successfully", "guest note: 99% sure"]) is None


def _context(fake: FakeClient, tmp_path: Path, seen: list[tuple[float, float | None]]) -> ToolContext:
    settings = load_settings(url="pve.invalid:8006", audit_log=tmp_path / "audit.jsonl")
    app = AppContext(settings=settings, client=fake, audit=AuditLog(tmp_path / "audit.jsonl"), signer=TokenSigner())

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total))

    return ToolContext(app=app, op=load_registry().operations["backup_now"], progress=progress)


async def test_follow_task_reports_the_tasks_own_percentage(tmp_path: Path) -> None:
    polls = {"n": 0}
    log_upto = [4, 5, 7]

    def status(params: dict[str, Any]) -> dict[str, Any]:
        polls["n"] += 1
        return {"status": "stopped", "exitstatus": "OK"} if polls["n"] > 2 else {"status": "running"}

    def log(params: dict[str, Any]) -> list[dict[str, Any]]:
        upto = log_upto[min(polls["n"] - 1, 2)]
        lines = VZDUMP_LOG[: upto if params.get("limit", 0) < 5000 else len(VZDUMP_LOG)]
        start = int(params.get("start", 0))
        return [{"n": i + 1, "t": t} for i, t in enumerate(lines)][start:]

    fake = FakeClient().on("GET", f"/nodes/pve1/tasks/{UPID}/status", status)
    fake.on("GET", f"/nodes/pve1/tasks/{UPID}/log", log)
    seen: list[tuple[float, float | None]] = []
    outcome = await follow_task(_context(fake, tmp_path, seen), "pve1", UPID, timeout=30)
    assert outcome.state == "ok"
    assert seen == [(3.0, 100.0), (41.0, 100.0), (100.0, 100.0)]
    starts = [p.get("start") for m, path, p in fake.calls if path.endswith("/log") and p.get("limit") == 500]
    assert starts == [0, 4]  # only new lines are fetched while it runs


async def test_follow_task_without_a_percentage_sends_no_total(tmp_path: Path) -> None:
    polls = {"n": 0}

    def status(params: dict[str, Any]) -> dict[str, Any]:
        polls["n"] += 1
        return {"status": "stopped", "exitstatus": "OK"} if polls["n"] > 2 else {"status": "running"}

    fake = FakeClient().on("GET", f"/nodes/pve1/tasks/{UPID}/status", status)
    fake.on("GET", f"/nodes/pve1/tasks/{UPID}/log", [{"n": 1, "t": "INFO: starting new backup job"}])
    seen: list[tuple[float, float | None]] = []
    await follow_task(_context(fake, tmp_path, seen), "pve1", UPID, timeout=30)
    assert len(seen) == 3 and all(total is None for _, total in seen)
