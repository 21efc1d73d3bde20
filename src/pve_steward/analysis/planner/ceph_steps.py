"""The Ceph part of a node evacuation: are the node's OSDs and monitor safe to stop, and the noout steps.

Emptying a node of guests is not enough on a hyper-converged cluster: shutting it down stops its OSDs
and its monitor. PVE answers "is it safe" with ``GET /nodes/{n}/ceph/cmd-safety`` (Ceph's
``ok-to-stop``, one daemon per call); the plan blocks when Ceph says no, and adds the steps an operator
takes around the maintenance: set noout before (so Ceph does not re-replicate the node's data while it
is down), unset it after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from pve_steward.analysis.catalog import Code, register_codes
from pve_steward.analysis.ceph import noout_set, osds
from pve_steward.analysis.findings import Finding, Severity, Subject, finding
from pve_steward.analysis.pverules import pve_rule
from pve_steward.models import Model, Untrusted

Row = dict[str, Any]


# Our sentences and commands name the node and its daemons: marked whole (design record 261206-57).
class CephStep(Model):
    when: Literal["before", "after"] = Field(description="before the node goes down, or after it is back")
    action: Untrusted
    command: Untrusted = Field(description="the shell command on a Ceph node; the PVE API call follows in parentheses")
    why: Untrusted


class CephDaemonCheck(Model):
    daemon: Untrusted = Field(description="osd.<id> or mon.<name>")
    safe: bool | None = Field(description="Ceph's ok-to-stop answer; null when it could not be asked")
    status: Untrusted = Field("", description="Ceph's message")


@dataclass
class NodeCeph:
    """What the planner needs about Ceph on the node to evacuate (the tools layer reads it)."""

    osd_tree: Row = field(default_factory=dict)
    mons: list[Row] = field(default_factory=list)
    flags: list[Row] = field(default_factory=list)
    mds: list[Row] = field(default_factory=list)  # /nodes/{n}/ceph/mds
    mgrs: list[Row] = field(default_factory=list)  # /nodes/{n}/ceph/mgr (names to hosts)
    mgrmap: Row = field(default_factory=dict)  # /cluster/ceph/status mgrmap (`mgr dump`, re-added by PVE)
    safety: dict[str, Row | str] = field(default_factory=dict)  # "osd.3" / "mon.pve1" / "mds.a" -> answer or error


def node_osds(c: NodeCeph, node: str) -> list[int]:
    return [int(o["id"]) for o in osds(c.osd_tree) if o.get("host") == node]


def node_mons(c: NodeCeph, node: str) -> list[str]:
    """The node's monitors by listmon's ``host`` (a mon id may differ from the node: createmon's ``monid``).

    Rows without a string ``host`` fall back to the default id, the node name.
    """
    # pve-manager PVE/Ceph/Services.pm get_services_info ($service->{host} = $host) + www/manager6/ceph/ServiceList.js
    return [str(m["name"]) for m in c.mons if isinstance(m, dict) and m.get("name") is not None and _host(m) == node]


def _host(row: Row) -> str:
    host = row.get("host")
    return host if isinstance(host, str) and host else str(row.get("name"))


def node_mds(c: NodeCeph, node: str) -> list[str]:
    """The node's metadata servers (MDS.pm index: host from get_services_info), stopped ones aside."""
    return [
        str(d["name"])
        for d in c.mds
        if isinstance(d, dict) and d.get("name") is not None and _host(d) == node and d.get("state") != "stopped"
    ]


def active_mgr_alone(c: NodeCeph, node: str) -> str | None:
    """The active manager's name when it runs on ``node`` and ``mgr dump`` lists no standby."""
    # pve-manager (master) PVE/Ceph/Services.pm is_safe_to_stop: "no standby mgr available for failover"
    active = c.mgrmap.get("active_name") if isinstance(c.mgrmap, dict) else None
    standbys = c.mgrmap.get("standbys") if isinstance(c.mgrmap, dict) else None
    if not isinstance(active, str) or not active or not isinstance(standbys, list) or standbys:
        return None  # no active manager, standbys unknown, or a standby takes over
    hosts = {str(m.get("name")): _host(m) for m in c.mgrs if isinstance(m, dict)}
    return active if hosts.get(active, active) == node else None


register_codes(
    "ceph",
    __name__,
    Code(
        "CEPH_OSD_NOT_OK_TO_STOP",
        "critical",
        "Ceph OSD not ok to stop",
        "Evacuation: PVE's cmd-safety (Ceph's ok-to-stop) says stopping an OSD on the node would leave PGs below "
        "min_size; taking the node down would stop I/O to them across the cluster. The plan is blocked.",
        "Bring the cluster's down OSDs back and let recovery finish (ceph -s: active+clean) before the maintenance.",
    ),
    Code(
        "CEPH_MDS_NOT_OK_TO_STOP",
        "critical",
        "Stopping the node's Ceph MDS would take CephFS down",
        "Evacuation: cmd-safety (ceph mds ok-to-stop) says no standby MDS would take over the node's active "
        "MDS rank; CephFS (and the cephfs storages on every node) would stop. The plan is blocked.",
        "Start a standby MDS on another node (pveceph mds create there) before the maintenance.",
    ),
    Code(
        "CEPH_MGR_NO_STANDBY",
        "warning",
        "The node runs the only Ceph manager",
        "Evacuation: the node holds the active Ceph manager and mgr dump (/cluster/ceph/status mgrmap) lists no "
        "standby: while it is down, Ceph's statistics, PVE's Ceph usage figures and the mgr modules stop.",
        "Create a manager on another node first (pveceph mgr create), so one takes over.",
    ),
    Code(
        "CEPH_MON_QUORUM_AT_RISK",
        "critical",
        "Stopping the node's Ceph monitor would lose quorum",
        "Evacuation: cmd-safety (ceph mon ok-to-stop) says the other monitors would not keep a quorum; Ceph would "
        "stop serving I/O. The plan is blocked.",
        "Bring the down monitors back (or add one on another node) before the maintenance.",
    ),
)


@pve_rule(
    "ceph.ok-to-stop",
    rule="cmd-safety asks Ceph '<service> ok-to-stop' for one daemon and reports safe when Ceph returns 0: for "
    "an OSD, every PG keeps at least min_size replicas up; for a monitor, the rest keep a quorum.",
    pve="pve-manager PVE/API2/Ceph.pm cmd_safety",
    codes=("CEPH_OSD_NOT_OK_TO_STOP", "CEPH_MON_QUORUM_AT_RISK", "CEPH_MDS_NOT_OK_TO_STOP"),
)
def ceph_evacuation(c: NodeCeph, node: str) -> tuple[list[CephDaemonCheck], list[CephStep], list[Finding]]:
    """Ceph's verdict per daemon on the node, the maintenance steps, and findings (critical = blocks)."""
    ids, mons, mds = node_osds(c, node), node_mons(c, node), node_mds(c, node)
    checks = [_check(c, f"osd.{i}") for i in ids] + [_check(c, f"mon.{m}") for m in mons]
    checks += [_check(c, f"mds.{d}") for d in mds]  # www/manager6/ceph/ServiceList.js: asked before stopping an MDS
    for unlisted in ("osd.?", "mds.?"):  # the node's daemons could not be listed: nothing is known to be safe
        if unlisted in c.safety:
            checks.append(_check(c, unlisted))
    found: list[Finding] = []
    for chk in checks:
        if chk.safe is not False:
            continue
        code = _UNSAFE[chk.daemon.split(".", 1)[0]]
        found.append(
            finding(
                code,
                Subject(kind="ceph", id=chk.daemon, node=node),
                f"Ceph says stopping {chk.daemon} on {node} is not safe: {chk.status}",
                {"daemon": chk.daemon, "ceph_status": chk.status},
                severity=Severity.CRITICAL,
            )
        )
    for chk in checks:
        if chk.safe is None:
            found.append(
                finding(
                    "DATA_INCOMPLETE",
                    Subject(kind="data", id=f"/nodes/{node}/ceph/cmd-safety", node=node),
                    f"could not ask Ceph whether {chk.daemon} is ok to stop: {chk.status}",
                    {"daemon": chk.daemon},
                )
            )
    return checks, _steps(c, node, ids, mons) + _mds_steps(node, mds), found + _mgr_findings(c, node)


_UNSAFE = {"osd": "CEPH_OSD_NOT_OK_TO_STOP", "mon": "CEPH_MON_QUORUM_AT_RISK", "mds": "CEPH_MDS_NOT_OK_TO_STOP"}


@pve_rule(
    "ceph.mgr-standby",
    rule="Stopping the node that holds the active manager is unsafe when mgr dump lists no standby: no "
    "manager takes over (PVE re-adds `mgr dump` as /cluster/ceph/status mgrmap).",
    pve="pve-manager PVE/Ceph/Tools.pm ceph_cluster_status + (master) PVE/Ceph/Services.pm is_safe_to_stop",
    codes=("CEPH_MGR_NO_STANDBY",),
)
def _mgr_findings(c: NodeCeph, node: str) -> list[Finding]:
    active = active_mgr_alone(c, node)
    if active is None:
        return []
    return [
        finding(
            "CEPH_MGR_NO_STANDBY",
            Subject(kind="ceph", id=f"mgr.{active}", node=node),
            f"{node} runs the active Ceph manager {active} and no standby manager is available for failover",
            {"mgr": active, "standbys": 0},
        )
    ]


def _mds_steps(node: str, mds: list[str]) -> list[CephStep]:
    if not mds:
        return []
    return [
        CephStep(
            when="before",
            action=f"confirm a standby MDS takes over from {node}'s MDS ({', '.join(mds)})",
            command=f"ceph mds ok-to-stop {' '.join(mds)} "
            f"(GET /nodes/{node}/ceph/cmd-safety?service=mds&id={mds[0]}&action=stop)",
            why="an active MDS without a standby takes CephFS, and every cephfs storage, offline",
        )
    ]


def _set_noout() -> CephStep:
    return CephStep(
        when="before",
        action="set noout so Ceph does not mark the node's OSDs out",
        command="ceph osd set noout (PUT /cluster/ceph/flags/noout value=1; operation ceph_set_flag)",
        why=_NOOUT_WHY,
    )


def _leave_noout() -> CephStep:
    """noout was set before the plan: PVE's own maintenance code only undoes the noout it set."""
    # pve-manager PVE/Ceph/Services.pm with_noout ("leaves any operator-set cluster-wide noout untouched")
    return CephStep(
        when="before",
        action="noout is already set: leave noout as the operator set it (do not set it, do not unset it "
        "afterwards; find out who set it and whether their maintenance is still running)",
        command="ceph osd dump | grep flags (GET /cluster/ceph/flags/noout: 1)",
        why="a noout set by someone else (e.g. a rolling upgrade) is theirs to unset; unsetting it after this "
        "node would let Ceph mark out the OSDs of the next node they take down",
    )


_NOOUT_WHY = (
    "without noout Ceph marks the down OSDs out after mon_osd_down_out_interval (10 min) and starts "
    "re-replicating their data onto the other nodes, filling them and loading the cluster"
)


def _check(c: NodeCeph, daemon: str) -> CephDaemonCheck:
    answer = c.safety.get(daemon)
    if not isinstance(answer, dict):
        return CephDaemonCheck(daemon=daemon, safe=None, status=str(answer or "not asked"))
    return CephDaemonCheck(daemon=daemon, safe=bool(int(answer.get("safe") or 0)), status=str(answer.get("status", "")))


def _steps(c: NodeCeph, node: str, ids: list[int], mons: list[str]) -> list[CephStep]:
    if not ids and not mons:
        return []
    steps: list[CephStep] = []
    if mons:
        steps.append(
            CephStep(
                when="before",
                action=f"confirm the other monitors keep quorum without mon.{mons[0]}",
                command=f"ceph mon ok-to-stop {' '.join(mons)} "
                f"(GET /nodes/{node}/ceph/cmd-safety?service=mon&id={mons[0]}&action=stop)",
                why="a Ceph cluster without monitor quorum stops serving all I/O",
            )
        )
    if not ids:
        return steps
    listed = " ".join(str(i) for i in ids)
    steps.append(
        CephStep(
            when="before",
            action=f"check that {node}'s OSDs ({listed}) may stop together",
            command=f"ceph osd ok-to-stop {listed}",
            why="PVE's cmd-safety asks for one OSD at a time; Ceph can judge the whole node's OSDs at once",
        )
    )
    already = noout_set(c.flags)
    steps.append(_leave_noout() if already else _set_noout())
    steps.append(
        CephStep(
            when="after",
            action=f"wait until {node}'s OSDs are up and in and PGs are active+clean",
            command=f"ceph osd tree {node}; ceph -s (GET /nodes/{node}/ceph/osd, GET /cluster/ceph/status)",
            why="recovery of the writes the node missed must finish before the next node goes down",
        )
    )
    if not already:  # only undo what the plan set: an operator's noout (a rolling upgrade's) stays
        steps.append(
            CephStep(
                when="after",
                action="unset noout",
                command="ceph osd unset noout (PUT /cluster/ceph/flags/noout value=0; operation ceph_unset_flag)",
                why="a noout left set keeps Ceph from healing a real OSD failure later",
            )
        )
    return steps
