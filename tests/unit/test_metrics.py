"""Metrics decided where the decision is made: busy answers, token refusals by reason, findings of a report."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from pve_steward.analysis.findings import Subject, finding
from pve_steward.config import load_settings
from pve_steward.observe import metrics
from pve_steward.pveio.admission import Admission, Busy
from pve_steward.security.audit import AuditLog
from pve_steward.security.tokens import TokenRefused, TokenSigner
from pve_steward.surface.registry import load_registry
from pve_steward.testing import FakeClient
from pve_steward.tools.context import AppContext, ToolContext

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def counting() -> None:
    metrics.keep()  # as the HTTP transport does: a process that serves /metrics counts


def test_a_process_that_serves_no_metrics_counts_nothing_and_imports_no_prometheus_client() -> None:
    """A stdio server has no reader for its metrics (issue 43): counting does nothing and loads nothing."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pve_steward.observe import metrics\n"
        "metrics.TOOL_CALLS.labels(operation='get_guest', outcome='ok').inc()\n"
        "metrics.api_instruments('PVE')[1].labels(endpoint='nodes').observe(0.1)\n"
        "metrics.count_findings(object())\n"
        "print('prometheus_client' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False"


def value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_busy_answer_is_counted_as_busy(tmp_path: Path) -> None:
    settings = load_settings(url="pve.invalid:8006", audit_log=tmp_path / "audit.jsonl")
    admission = Admission(limit=1, wait=0.01)
    app = AppContext(
        settings=settings,
        client=FakeClient(),
        audit=AuditLog(tmp_path / "audit.jsonl"),
        signer=TokenSigner(),
        admission=admission,
    )
    registry = load_registry()
    op = registry.operations["check_cluster_health"]
    before = value("pve_steward_admission_busy_total", operation=op.name)
    calls = value("pve_steward_tool_calls_total", operation=op.name, outcome="busy")
    await admission._semaphore().acquire()  # every slot is taken
    with pytest.raises(Busy):
        await registry.handlers[op.name](ToolContext(app=app, op=op))
    assert value("pve_steward_admission_busy_total", operation=op.name) == before + 1
    assert value("pve_steward_tool_calls_total", operation=op.name, outcome="busy") == calls + 1
    assert value("pve_steward_tool_calls_in_flight") == 0


@pytest.mark.anyio
async def test_tokens_count_issued_confirmed_and_refusals_by_reason() -> None:
    signer = TokenSigner(ttl=10)
    issued = value("pve_steward_confirmation_tokens_total", event="issued", reason="")
    confirmed = value("pve_steward_confirmation_tokens_total", event="confirmed", reason="")
    token = signer.issue("guest_start", {"vmid": 1}, {"vmid": 1}, "s", now=1000.0)
    assert value("pve_steward_confirmation_tokens_total", event="issued", reason="") == issued + 1
    with pytest.raises(TokenRefused) as expired:
        await signer.check(token, "guest_start", {"vmid": 1}, now=2000.0)
    assert expired.value.kind == "expired"
    await signer.consume(await signer.check(token, "guest_start", {"vmid": 1}, now=1001.0))
    assert value("pve_steward_confirmation_tokens_total", event="confirmed", reason="") == confirmed + 1
    with pytest.raises(TokenRefused) as replayed:
        await signer.check(token, "guest_start", {"vmid": 1}, now=1002.0)
    assert replayed.value.kind == "replayed"
    with pytest.raises(TokenRefused) as forged:
        await signer.check(token[:-4] + "AAAA", "guest_start", {"vmid": 1}, now=1002.0)
    assert forged.value.kind == "invalid"


def test_findings_are_counted_once_each_by_code_and_severity() -> None:
    one = finding("BACKUP_STALE", Subject(kind="guest", id="100"), "stale")

    class Part(BaseModel):
        findings: list[object]

    class Report(BaseModel):
        findings: list[object]
        parts: list[Part]

    before = value("pve_steward_findings_total", code="BACKUP_STALE", severity=one.severity.value)
    metrics.count_findings(Report(findings=[one], parts=[Part(findings=[one])]))
    assert value("pve_steward_findings_total", code="BACKUP_STALE", severity=one.severity.value) == before + 1


def test_each_return_of_one_shared_report_counts_its_findings_again() -> None:
    """Fifty callers of one run return one report object: its tally is made once, and every return counts."""
    stale = [finding("BACKUP_STALE", Subject(kind="guest", id=str(v)), "stale") for v in (100, 101)]
    offline = finding("NODE_OFFLINE", Subject(kind="node", id="pve3"), "offline")

    class Report(BaseModel):
        findings: list[object]

    shared = Report(findings=[*stale, offline])
    before = (
        value("pve_steward_findings_total", code="BACKUP_STALE", severity=stale[0].severity.value),
        value("pve_steward_findings_total", code="NODE_OFFLINE", severity=offline.severity.value),
    )
    for _caller in range(3):
        metrics.count_findings(shared)
    assert value("pve_steward_findings_total", code="BACKUP_STALE", severity=stale[0].severity.value) == before[0] + 6
    assert value("pve_steward_findings_total", code="NODE_OFFLINE", severity=offline.severity.value) == before[1] + 3
