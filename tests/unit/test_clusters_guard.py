"""A cluster's tier ceiling is enforced by the guard too (behind the argument check), naming the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pve_steward.config import load_settings
from pve_steward.security.audit import AuditLog
from pve_steward.security.guard import Refused
from pve_steward.security.tiers import Tier
from pve_steward.security.tokens import TokenSigner
from pve_steward.surface.registry import load_registry
from pve_steward.testing import FakeClient
from pve_steward.tools.context import AppContext, Clusters, ToolContext, UnknownCluster

pytestmark = pytest.mark.anyio


def _app(tmp_path: Path, name: str, ceiling: Tier) -> AppContext:
    settings = load_settings(url=f"{name}.invalid:8006", tier="admin", audit_log=tmp_path / "audit.jsonl")
    return AppContext(
        settings=settings,
        client=FakeClient(),
        audit=AuditLog(tmp_path / "audit.jsonl"),
        signer=TokenSigner(),
        cluster=name,
        max_tier=ceiling,
    )


async def test_a_write_above_the_cluster_ceiling_is_refused_and_audited(tmp_path: Path) -> None:
    registry = load_registry()
    app = _app(tmp_path, "lab", Tier.READ_ONLY)
    fake = app.client
    assert isinstance(fake, FakeClient)
    t = ToolContext(app=app, op=registry.operations["guest_start"])
    with pytest.raises(Refused, match=r"cluster 'lab' allows at most read_only \(max_tier of \[clusters\.lab\]\)"):
        await registry.handlers["guest_start"](t, vmid=100)
    assert fake.calls == []  # nothing was asked of the cluster
    record = json.loads((tmp_path / "audit.jsonl").read_text().splitlines()[-1])
    assert (record["cluster"], record["tool"], record["outcome"]) == ("lab", "guest_start", "denied")


def test_the_registry_resolves_names_and_names_the_choices(tmp_path: Path) -> None:
    a, b = _app(tmp_path, "a", Tier.ADMIN), _app(tmp_path, "b", Tier.OPERATOR)
    clusters = Clusters({"a": a, "b": b})
    assert clusters.default is a and clusters.get("b") is b and b.clusters is clusters
    with pytest.raises(UnknownCluster, match="no cluster 'c'; 'cluster' must be one of: a, b"):
        clusters.get("c")


def test_the_shared_heavy_call_budget_is_counted_once_in_metrics(tmp_path: Path) -> None:
    from pve_steward.observe import metrics
    from pve_steward.pveio.admission import Admission

    a, b = _app(tmp_path, "a", Tier.ADMIN), _app(tmp_path, "b", Tier.ADMIN)
    a.admission = b.admission = Admission()
    a.admission.joined, a.admission.continued = 3, 2
    collector = metrics._AppCollector()
    collector.track(a)
    collector.track(b)
    families = {m.name: [s.value for s in m.samples] for m in collector.collect()}
    assert families["pve_steward_admission_joined"] == [3]
    assert families["pve_steward_admission_continued"] == [2]
