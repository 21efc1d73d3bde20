"""Node load over the day: CPU, I/O wait, PSI pressure and cv4pve-diag's composite health score.

One read per node: GET /nodes/{node}/rrddata?timeframe=day&cf=AVERAGE (pve-manager PVE/API2/Nodes.pm
rrddata, written by pvestatd). Day averages, as cv4pve-diag reads them: a momentary spike is not a
health finding (check_pve reads the instant value of /nodes/{node}/status).
"""

from __future__ import annotations

from typing import Any

from pve_steward.analysis.catalog import Code, Need, Threshold, check
from pve_steward.analysis.checks.node import graded, node_subject, pct
from pve_steward.analysis.data import ClusterData
from pve_steward.analysis.findings import Finding, Severity, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.analysis.thresholds import Thresholds

RRD_DAY = Need("node_rrd_day", "/nodes/{node}/rrddata", per="node", params=(("timeframe", "day"), ("cf", "AVERAGE")))


def _avg(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [float(v) for r in rows if isinstance(v := r.get(key), (int, float))]  # a tuple: cheaper than int | float
    return sum(vals) / len(vals) if vals else None


@pve_rule(
    "node.rrd-units",
    rule="pvestatd stores a node's cpu and iowait as fractions of 1 (the GUI multiplies by 100) and the PSI "
    "pressure columns as /proc/pressure's avg10, already a percentage (the GUI shows them as they are).",
    pve="pve-manager PVE/Service/pvestatd.pm update_node_status, www/manager6/data/model/RRDModels.js pve-rrd-node; "
    "pve-common src/PVE/ProcFSTools.pm parse_pressure",
    codes=("NODE_CPU_HIGH", "NODE_IOWAIT_HIGH", "NODE_PRESSURE_HIGH"),
)
def _as_pct(field_: str, value: float) -> float:
    """A node RRD value as a percentage."""
    return value if field_.startswith("pressure") else value * 100


_RRD_METRICS = (
    # code, rrd field, threshold prefix, words, anchors' defaults
    ("NODE_CPU_HIGH", "cpu", "node_cpu", "CPU usage", (70, 85)),
    ("NODE_IOWAIT_HIGH", "iowait", "node_iowait", "I/O wait", (70, 85)),
    ("NODE_PRESSURE_HIGH", "pressurecpusome", "node_psi_cpu_some", "CPU pressure (PSI some)", (40, 70)),
    ("NODE_PRESSURE_HIGH", "pressureiofull", "node_psi_io_full", "I/O pressure (PSI full)", (10, 30)),
    ("NODE_PRESSURE_HIGH", "pressurememoryfull", "node_psi_memory_full", "memory pressure (PSI full)", (5, 15)),
)


@check(
    "node",
    codes=[
        Code(
            "NODE_CPU_HIGH",
            "warning",
            "Node CPU busy over the day",
            "The day's average CPU use (GET /nodes/{node}/rrddata timeframe=day cf=AVERAGE, field cpu) is at or "
            "above the warning threshold (cv4pve-diag: 70 %), critical at 85 %.",
            "Spread the load: move busy guests (check_guest_migration) or add nodes; see Node > Summary graphs.",
        ),
        Code(
            "NODE_IOWAIT_HIGH",
            "warning",
            "Node waits on storage",
            "The day's average I/O wait (rrddata field iowait) is at or above the warning threshold "
            "(cv4pve-diag applies its CPU thresholds: 70 %, critical 85 %): storage is the bottleneck.",
            "Find the busy disks (`iostat -x 5`, Node > Disks) and move I/O-heavy guests to faster storage.",
        ),
        Code(
            "NODE_PRESSURE_HIGH",
            "warning",
            "Node under CPU, I/O or memory pressure",
            "The day's average Linux PSI value (rrddata pressurecpusome / pressureiofull / pressurememoryfull, "
            "PVE 9) is at or above its warning threshold (cv4pve-diag node defaults: CPU 40/70 %, I/O full "
            "10/30 %, memory full 5/15 %). Only rated where the node reports a non-zero value.",
            "Reduce contention: move guests away (check_guest_migration), add RAM or faster storage.",
        ),
    ],
    needs=[RRD_DAY],
    thresholds=[
        Threshold(f"{prefix}_{level}_pct", default, f"day average {words} (%)", maximum=100)
        for _code, _field, prefix, words, defaults in _RRD_METRICS
        for level, default in zip(("warning", "critical"), defaults, strict=True)
    ],
    anchors=[
        "cv4pve-diag:WN0027",
        "cv4pve-diag:WN0028",
        "cv4pve-diag:WN0031",
        "cv4pve-diag:WN0032",
        "cv4pve-diag:WN0033",
        "check_pve:cpu",
        "check_pve:io_wait",
    ],
    pve="pve-manager PVE/API2/Nodes.pm rrddata; PVE/Service/pvestatd.pm update_node_status (cpu, iowait, PSI)",
)
def load_high(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Sustained CPU, I/O wait and pressure: day averages, not a momentary spike."""
    out = []
    for node, answer in sorted(data.read_nodes(RRD_DAY.key).items()):
        rows = [r for r in answer or [] if isinstance(r, dict)]
        for code, field_, prefix, words, _defaults in _RRD_METRICS:
            avg = _avg(rows, field_)
            if avg is None or (code == "NODE_PRESSURE_HIGH" and avg <= 0):
                continue
            pct = _as_pct(field_, avg)
            sev = graded(pct, t.get(f"{prefix}_warning_pct"), t.get(f"{prefix}_critical_pct"))
            if sev:
                out.append(
                    finding(
                        code,
                        node_subject(node),
                        f"{words} on {node} averaged {pct:.0f}% over the day",
                        {"metric": field_, "day_average_pct": round(pct, 1), "samples": len(rows)},
                        severity=sev,
                    )
                )
    return out


def _rrd_pct(rows: list[dict[str, Any]], used: str, total: str) -> float | None:
    pcts = [p for r in rows if (p := pct(r.get(used), r.get(total))) is not None]
    return sum(pcts) / len(pcts) if pcts else None


@check(
    "node",
    codes=[
        Code(
            "NODE_HEALTH_SCORE_LOW",
            "warning",
            "Node health score is low",
            "100 - (0.4 x CPU % + 0.4 x memory % + 0.2 x root disk %), each the day's average of GET "
            "/nodes/{node}/rrddata, is below the warning threshold (cv4pve-diag node default: 70), critical below "
            "50.",
            "See which part weighs: NODE_CPU_HIGH, NODE_MEMORY_PRESSURE, NODE_ROOTFS_FULL; spread guests "
            "(check_guest_migration) or add capacity.",
        )
    ],
    needs=[RRD_DAY],
    thresholds=[
        Threshold("node_health_score_warning", 70, "node health score (0-100) below which it warns", maximum=100),
        Threshold(
            "node_health_score_critical", 50, "node health score (0-100) below which it is critical", maximum=100
        ),
    ],
    anchors=["cv4pve-diag:WG0032"],
    pve="pve-manager PVE/API2/Nodes.pm rrddata (cpu, memused/memtotal, rootused/roottotal)",
)
def health_score(data: ClusterData, t: Thresholds) -> list[Finding]:
    """cv4pve-diag's composite node score from the day's averages."""
    out = []
    warn, crit = t.get("node_health_score_warning"), t.get("node_health_score_critical")
    for node, answer in sorted(data.read_nodes(RRD_DAY.key).items()):
        rows = [r for r in answer or [] if isinstance(r, dict)]
        cpu = _avg(rows, "cpu")
        mem, disk = _rrd_pct(rows, "memused", "memtotal"), _rrd_pct(rows, "rootused", "roottotal")
        if cpu is None or mem is None or disk is None:
            continue
        score = round(100 - (cpu * 100 * 0.4 + mem * 0.4 + disk * 0.2), 1)
        if score < warn:
            out.append(
                finding(
                    "NODE_HEALTH_SCORE_LOW",
                    node_subject(node),
                    f"health score of {node} is {score}/100",
                    {
                        "score": score,
                        "cpu_pct": round(cpu * 100, 1),
                        "mem_pct": round(mem, 1),
                        "root_pct": round(disk, 1),
                    },
                    severity=Severity.CRITICAL if score < crit else None,
                )
            )
    return out


@check(
    "node",
    codes=[
        Code(
            "NODE_NETWORK_BUSY",
            "warning",
            "Node network throughput above the configured threshold",
            "The day's average netin or netout (bytes/s, GET /nodes/{node}/rrddata) is at or above its warning "
            "threshold, critical at its critical one. Off by default (thresholds 0), as in cv4pve-diag: a link's "
            "capacity is the operator's to state.",
            "Spread network-heavy guests (check_guest_migration), add links to the bond, or move traffic (backup, "
            "migration) to its own network: Datacenter > Options > Migration Settings.",
        )
    ],
    needs=[RRD_DAY],
    thresholds=[
        Threshold(f"node_net_{way}_{level}_bytes", 0, f"day average net{way} in bytes/s (0: off)", maximum=None)
        for way in ("in", "out")
        for level in ("warning", "critical")
    ],
    anchors=["cv4pve-diag:WN0039", "cv4pve-diag:WN0040"],
    pve="pve-manager PVE/API2/Nodes.pm rrddata (netin, netout: bytes/s from pvestatd)",
)
def network_busy(data: ClusterData, t: Thresholds) -> list[Finding]:
    """Day-average throughput against thresholds the operator set (both 0: not rated)."""
    out = []
    for node, answer in sorted(data.read_nodes(RRD_DAY.key).items()):
        rows = [r for r in answer or [] if isinstance(r, dict)]
        for way in ("in", "out"):
            warn, crit = t.get(f"node_net_{way}_warning_bytes"), t.get(f"node_net_{way}_critical_bytes")
            avg = _avg(rows, f"net{way}")
            if warn <= 0 or crit <= 0 or avg is None:
                continue
            sev = graded(avg, warn, crit)
            if sev:
                out.append(
                    finding(
                        "NODE_NETWORK_BUSY",
                        node_subject(node),
                        f"net{way} of {node} averaged {avg / 1e6:.1f} MB/s over the day",
                        {"direction": way, "day_average_bytes": round(avg), "warning": warn, "critical": crit},
                        severity=sev,
                    )
                )
    return out
