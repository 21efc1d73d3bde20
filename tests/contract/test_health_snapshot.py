"""Golden snapshot of the health report and the migration verdicts of a generated cluster.

Performance work on the analysis must not change what it finds or says. Any change shows up here
as a diff to review. Regenerate after an intended change with ``UPDATE_SNAPSHOTS=1 make test``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.health import diagnose
from pve_steward.analysis.migration.findings import analyze_migratability
from pve_steward.analysis.thresholds import Thresholds
from pvesim.payload import cluster_payload

SNAPSHOT = Path(__file__).parent / "snapshots" / "health-400-guests.json"
FROZEN = 1796300000.0  # the generated ages (backups, locks, tasks) are relative to the simulator's clock


def _snapshot(monkeypatch: pytest.MonkeyPatch) -> ClusterData:
    monkeypatch.setattr(time, "time", lambda: FROZEN)
    _cluster, payload = cluster_payload(400, nodes=8, seed=1)
    wire = json.loads(json.dumps(payload))  # as the collector receives it
    return ClusterData(**{**wire, "configs": {int(k): v for k, v in wire["configs"].items()}})


def test_health_report_and_verdicts_match_their_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    report = diagnose(_snapshot(monkeypatch), Thresholds(), limit=None)
    _findings, verdicts = analyze_migratability(_snapshot(monkeypatch))
    current = json.dumps(
        {
            "report": report.model_dump(mode="json"),
            "verdicts": {
                str(m.vmid): [m.verdict, m.movable_to(), sorted({r.code for r in m.reasons})] for m in verdicts
            },
        },
        indent=1,
        sort_keys=True,
    )
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(current + "\n", encoding="utf-8")
    assert SNAPSHOT.exists(), f"no snapshot {SNAPSHOT.name}: run UPDATE_SNAPSHOTS=1 make test"
    assert report.counts.critical and report.counts.warning, "the generated cluster plants problems"
    assert SNAPSHOT.read_text(encoding="utf-8") == current + "\n", (
        "the health analysis changed what it finds or says: review the diff, then UPDATE_SNAPSHOTS=1 make test"
    )
