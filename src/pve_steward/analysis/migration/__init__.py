"""Migratability: can this guest move to that node, how (live / offline / restart), and if not, why.

The steps an operator would name, one module each, each following the PVE code it mirrors:
``targets`` (which nodes at all), ``devices`` and ``volumes`` (the per-guest verdict from the
config and the storage config), ``target_rules`` (what each node must offer), ``pvecheck`` (PVE's
own precondition as a cross-check), ``verdict`` (the procedure and the mode) and ``findings``
(the health check's view). ``docs/rules.md`` lists every rule and the PVE function behind it.
"""

from __future__ import annotations

from pve_steward.analysis.migration.findings import analyze_migratability, ha_problems
from pve_steward.analysis.migration.model import Migratability, Mode, Reason, TargetVerdict, Verdict
from pve_steward.analysis.migration.storage import storage_on, storage_shared
from pve_steward.analysis.migration.targets import cpu_model, eligible_targets, maintenance_nodes, replication_jobs_of
from pve_steward.analysis.migration.verdict import assess

__all__ = [
    "Migratability",
    "Mode",
    "Reason",
    "TargetVerdict",
    "Verdict",
    "analyze_migratability",
    "assess",
    "cpu_model",
    "eligible_targets",
    "ha_problems",
    "maintenance_nodes",
    "replication_jobs_of",
    "storage_on",
    "storage_shared",
]
