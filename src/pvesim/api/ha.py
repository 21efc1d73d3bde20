"""HA manager endpoints: status, resources, groups (PVE 8), rules (PVE 9), migrate/relocate requests."""

from __future__ import annotations

import time
from typing import Any

from pvesim import migration
from pvesim.api import render
from pvesim.api.guests import KIND, PREFIX, request_ha_move, set_running, set_stopped
from pvesim.api.registry import ApiError, Call, b, route
from pvesim.scenario import group_as_rule, major
from pvesim.state import Cluster, HAResource, Node
from pvesim.tasks import start_task


def _stamp(c: Cluster) -> int:
    return int(c.clock.now()) - 3


def _fmt_time(ts: float) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(ts))


def _service_node(c: Cluster, res: HAResource) -> str:
    g = c.guests.get(res.vmid)
    return g.node if g else (c.ha_master or next(iter(c.nodes)))


def _crm_state(c: Cluster, res: HAResource) -> str:
    if res.crm_state:
        state = res.crm_state
    else:
        g = c.guests.get(res.vmid)
        if g is not None and not c.nodes[g.node].online and res.state == "started":
            return "fence"
        state = {"started": "started", "stopped": "stopped", "disabled": "stopped", "ignored": "ignored"}[res.state]
    # Manager.pm handle_disarm: once disarmed in freeze mode, every service at rest is frozen in place
    if _disarmed(c, "freeze") and state in ("started", "stopped", "request_stop", "request_start"):
        return "freeze"
    return state


def _disarmed(c: Cluster, mode: str | None = None) -> bool:
    """HA fully disarmed (all online LRMs in disarm mode), in ``mode`` if given."""
    d = c.ha_disarm
    return d is not None and d["state"] == "disarmed" and (mode is None or d["mode"] == mode)


def _with_watchdog(c: Cluster) -> bool:
    """pve-ha-manager 5.1.3+ (the 9.1 schema's fencing row): LRM rows name their watchdog state."""
    return c.schema_version >= "9.1"


def _lrm_row(c: Cluster, n: Node, now: int) -> dict[str, Any]:
    """One LRM row of the HA status, as API2/HA/Status.pm renders the node's lrm_status file."""
    row: dict[str, Any] = {"id": f"lrm:{n.name}", "type": "lrm", "node": n.name}
    if n.online and n.lrm == "unreadable":  # Config.pm read_lrm_status: no file, so no timestamp
        return {**row, "status": f"{n.name} (unable to read lrm status)"}
    mode = "disarm" if _disarmed(c) else n.lrm_mode
    if not n.online or n.lrm == "dead":
        stamp, state = now - (3600 if not n.online else 120), "old timestamp - dead?"
    elif n.lrm == "time_drift":  # stamped more than 2 s ahead of the answering node's clock
        stamp, state = now + 90, "detected time drift!"
    else:
        stamp, state = now, "active"
    lrm_state = "active" if any(_service_node(c, r) == n.name for r in c.ha_resources.values()) else "idle"
    if mode == "maintenance":
        lrm_state = "maintenance"
    if state == "active" and lrm_state in ("active", "maintenance"):
        watchdog = "watchdog active"
    elif mode == "disarm":
        watchdog = "watchdog released"
    else:
        watchdog = "watchdog standby"
    if state == "active":
        state = f"{mode} mode" if mode != "active" else lrm_state
    elif mode in ("maintenance", "disarm"):
        state = f"{mode} mode"
    parts = [state, watchdog] if _with_watchdog(c) else [state]
    return {**row, "status": f"{n.name} ({', '.join(parts)}, {_fmt_time(stamp)})", "timestamp": stamp}


@route("GET", "/cluster/ha/status/current")
def ha_status(call: Call) -> list[dict[str, Any]]:
    c = call.cluster
    if not c.ha_resources:
        return [
            {"id": "quorum", "type": "quorum", "node": next(iter(c.nodes)), "status": "OK", "quorate": b(c.quorate)}
        ]
    master = c.ha_master or next(iter(c.nodes))
    now = _stamp(c)
    disarm = c.ha_disarm
    extra = f" - {disarm['state']}, resource mode: {disarm['mode']}" if disarm else ""
    rows: list[dict[str, Any]] = [
        {
            "id": "quorum",
            "type": "quorum",
            "node": master,
            "status": "OK" if c.quorate else "No quorum on node",
            "quorate": b(c.quorate),
        },
        {
            "id": "master",
            "type": "master",
            "node": master,
            "status": f"{master} (active, {_fmt_time(now)}){extra}",
            "timestamp": now,
        },
    ]
    if c.schema_version >= "9.1":
        if disarm:
            released = "CRM watchdog released" if disarm["state"] == "disarmed" else "CRM watchdog active"
            fencing = {
                "status": f"{disarm['state']}, resource mode: {disarm['mode']} ({released})",
                "armed-state": disarm["state"],
                "resource_mode": disarm["mode"],
            }
        else:
            fencing = {"status": "armed (CRM watchdog active)", "armed-state": "armed"}
        rows.append({"id": "fencing", "type": "fencing", "node": master, **fencing})
    rows += [_lrm_row(c, n, now) for n in sorted(c.nodes.values(), key=lambda n: n.name)]
    for res in sorted(c.ha_resources.values(), key=lambda r: r.sid):
        node = _service_node(c, res)
        state = _crm_state(c, res)
        verbose = "ignore" if disarm and disarm["mode"] == "ignore" else state
        rows.append(
            {
                "id": f"service:{res.sid}",
                "type": "service",
                "sid": res.sid,
                "node": node,
                "crm_state": state,
                "state": verbose,
                "request_state": res.state,
                "status": f"{res.sid} ({node}, {verbose})",
                "max_restart": res.max_restart,
                "max_relocate": res.max_relocate,
                "failback": b(res.failback),
            }
        )
    return rows


@route("GET", "/cluster/ha/status/manager_status")
def manager_status(call: Call) -> dict[str, Any]:
    c = call.cluster
    now = _stamp(c)
    master = c.ha_master or next(iter(c.nodes))
    node_status = {
        n.name: ("maintenance" if n.lrm_mode == "maintenance" else "online") if n.online else "unknown"
        for n in c.nodes.values()
    }
    services = {
        r.sid: {"node": _service_node(c, r), "state": _crm_state(c, r), "uid": r.sid.replace(":", "")}
        for r in c.ha_resources.values()
    }
    lrm: dict[str, Any] = {}
    for n in c.nodes.values():
        if n.online and n.lrm == "unreadable":
            lrm[n.name] = {"mode": "unknown"}  # Config.pm read_lrm_status without the file
            continue
        stamp = {"dead": now - 120, "time_drift": now + 90}.get(n.lrm, now) if n.online else now - 3600
        lrm[n.name] = {
            "mode": "disarm" if _disarmed(c) else n.lrm_mode,
            "state": ("wait_for_agent_lock" if _disarmed(c) else "active") if n.online else "lost_agent_lock",
            "results": {},
            "timestamp": stamp,
        }
    status: dict[str, Any] = {
        "master_node": master,
        "node_status": node_status,
        "service_status": services,
        "timestamp": now,
    }
    if c.ha_disarm:
        status["disarm"] = dict(c.ha_disarm)
    return {
        "manager_status": status,
        "quorum": {"node": master, "quorate": str(b(c.quorate))},
        "lrm_status": lrm,
    }


def resources_digest(c: Cluster) -> str:
    """Like PVE's digest of resources.cfg: any change to any resource changes it."""
    return render.digest_of(
        [
            (r.sid, r.state, r.group, r.max_restart, r.max_relocate, r.failback, r.comment)
            for r in sorted(c.ha_resources.values(), key=lambda r: r.sid)
        ]
    )


def _resource_row(res: HAResource, digest: str) -> dict[str, Any]:
    """``digest``: :func:`resources_digest`, one file's, taken once per answer."""
    row: dict[str, Any] = {
        "sid": res.sid,
        "type": res.type,
        "state": res.state,
        "max_restart": res.max_restart,
        "max_relocate": res.max_relocate,
        "failback": b(res.failback),
        "digest": digest,
    }
    if res.group:
        row["group"] = res.group
    if res.comment:
        row["comment"] = res.comment
    return row


@route("GET", "/cluster/ha/resources")
def ha_resources(call: Call) -> list[dict[str, Any]]:
    c = call.cluster
    want = call.params.get("type")
    digest = resources_digest(c)
    return [
        _resource_row(r, digest)
        for r in sorted(c.ha_resources.values(), key=lambda r: r.sid)
        if want is None or r.type == want
    ]


def _resource(call: Call) -> HAResource:
    sid = str(call.params["sid"])
    if sid.isdigit():
        g = call.cluster.guests.get(int(sid))
        if g is None:
            raise ApiError(500, f"unable to detect SID from VMID - VM/CT {sid} does not exist")
        sid = g.sid
    res = call.cluster.ha_resources.get(sid)
    if res is None:
        raise ApiError(500, f"resource '{sid}' is not HA managed")
    return res


@route("GET", "/cluster/ha/resources/{sid}")
def ha_resource(call: Call) -> dict[str, Any]:
    return _resource_row(_resource(call), resources_digest(call.cluster))


@route("GET", "/cluster/ha/groups")
def ha_groups(call: Call) -> list[dict[str, Any]]:
    """PVE 9 refuses once groups.cfg is empty (pve-ha-manager API2/HA/Groups.pm index,
    Config.pm ``have_groups_been_migrated``); PVE 8 lists them."""
    c = call.cluster
    if major(c.version) >= 9 and not c.ha_groups:
        raise ApiError(500, "cannot index groups: ha groups have been migrated to rules")
    digest = render.digest_of(sorted(c.ha_groups.items()))
    return [{"group": name, "type": "group", "digest": digest, **cfg} for name, cfg in sorted(c.ha_groups.items())]


def full_rules(c: Cluster) -> dict[str, dict[str, Any]]:
    """Rules plus groups not yet migrated, as PVE 9's rules index shows them (API2/HA/Rules.pm
    ``$get_full_rules_config`` -> Groups.pm ``migrate_groups_to_rules``)."""
    rules = dict(c.ha_rules)
    members: dict[str, list[str]] = {}
    for res in c.ha_resources.values():
        if res.group and res.group in c.ha_groups:
            members.setdefault(res.group, []).append(res.sid)
    for name, sids in sorted(members.items()):
        rules[f"ha-group-{name}"] = group_as_rule(name, c.ha_groups[name], sids)
    return rules


@route("GET", "/cluster/ha/rules")
def ha_rules(call: Call) -> list[dict[str, Any]]:
    rules = full_rules(call.cluster)
    rows = []
    for order, (name, cfg) in enumerate(sorted(rules.items()), start=1):
        if "type" in call.params and cfg.get("type") != call.params["type"]:
            continue
        if "resource" in call.params and call.params["resource"] not in str(cfg.get("resources", "")).split(","):
            continue
        rows.append(rule_row(call.cluster, name, cfg, order))
    return rows


def rule_row(c: Cluster, name: str, cfg: dict[str, Any], order: int) -> dict[str, Any]:
    """Rules.pm $get_api_ha_rule: the rule with its id, the file's digest and its order; resources and nodes
    re-encoded (the resource list sorted). set_rule_defaults adds nothing: no optional property of a rule type
    has a true default (NodeAffinity's ``strict`` defaults to 0)."""
    row = {"rule": name, "order": order, "digest": render.digest_of(sorted(c.ha_rules.items())), **cfg}
    if cfg.get("resources"):  # Rules.pm encode_value: the resource list comes back sorted
        row["resources"] = ",".join(sorted(r.strip() for r in str(cfg["resources"]).split(",") if r.strip()))
    return row


@route("PUT", "/cluster/ha/resources/{sid}")
def update_ha_resource(call: Call) -> None:
    """Change a resource's config; the CRM then brings the guest to the requested state (an LRM task)."""
    c = call.cluster
    res = _resource(call)
    # pve-ha-manager API2/HA/Resources.pm update: check_service_state (a managed service in error takes 'disabled')
    if res.state != "ignored" and _crm_state(c, res) == "error" and call.params.get("state") != "disabled":
        raise ApiError(500, f"service '{res.sid}' in error state, must be disabled and fixed first")
    if "digest" in call.params and call.params["digest"] != resources_digest(c):
        raise ApiError(500, "detected modified configuration - file changed by other user? Try again.")
    if "comment" in call.params:
        res.comment = str(call.params["comment"])
    if "state" not in call.params:
        return
    res.state = str(call.params["state"])
    g = c.guests.get(res.vmid)
    if g is None or not c.nodes[g.node].online:
        return
    if res.state == "started" and g.status != "running":
        action = "start"
    elif res.state in ("stopped", "disabled") and g.status == "running":
        action = "shutdown"
    else:
        return

    def finish() -> str | None:
        if action == "start":
            set_running(c, g)
        else:
            set_stopped(g)
        return None

    log = [f"{'Starting' if action == 'start' else 'Stopping'} {KIND[g.type]} {g.vmid} (HA request)"]
    start_task(c, g.node, PREFIX[g.type] + action, str(g.vmid), "root@pam", 3, log, finish)


def _ha_move(call: Call, kind: str) -> dict[str, Any] | None:
    c = call.cluster
    res = _resource(call)
    target = call.params["node"]
    if target not in c.nodes:
        raise ApiError(500, f"no such cluster node '{target}'")
    if _crm_state(c, res) == "error":
        raise ApiError(500, f"service '{res.sid}' in error state, must be disabled and fixed first")
    g = c.guests[res.vmid]
    if c.schema_version < "9":  # no resource-affinity rules before PVE 9
        if g.node != target and c.nodes[target].online and c.nodes[target].lrm_mode != "maintenance":
            request_ha_move(c, g, target, kind)
        return None
    # the CRM's queue_resource_motion (pve-ha-manager Manager.pm): a negative partner on the target refuses the
    # command; positive partners go along; update_crm_commands ignores a target that is not HA-online
    blocking = migration.blocking_ha_resources(c, g).get(target, [])
    along = [
        sid
        for sid in migration.dependent_ha_resources(c, res.sid)
        if (peer := c.ha_resources.get(sid)) is not None
        and peer.state != "ignored"
        and c.guests.get(peer.vmid) is not None
        and c.guests[peer.vmid].node != target
    ]
    if not blocking and c.nodes[target].online and c.nodes[target].lrm_mode != "maintenance":
        for moving in [g] + [c.guests[c.ha_resources[sid].vmid] for sid in along]:
            if moving.node != target:
                request_ha_move(c, moving, target, kind)
    answer: dict[str, Any] = {"sid": res.sid, "requested-node": target}
    if along:
        answer["comigrated-resources"] = along
    if blocking:
        answer["blocking-resources"] = blocking
    return answer


@route("POST", "/cluster/ha/resources/{sid}/migrate")
def ha_migrate(call: Call) -> dict[str, Any] | None:
    return _ha_move(call, "migrate")


@route("POST", "/cluster/ha/resources/{sid}/relocate")
def ha_relocate(call: Call) -> dict[str, Any] | None:
    return _ha_move(call, "relocate")
