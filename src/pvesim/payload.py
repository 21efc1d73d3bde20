"""The raw API payloads of a generated cluster, rendered by pvesim's own handlers in-process.

They have the shape the diagnostics collector gathers over HTTPS (the same handlers answer both),
without 10,000 config requests first: for the analysis benchmark and the health report snapshot.
"""

from __future__ import annotations

from typing import Any

from pvesim import api as sim_api
from pvesim.apischema import ApiSchema
from pvesim.generator import generate
from pvesim.scenario import build_cluster
from pvesim.state import Cluster


def _call(cluster: Cluster, schema: ApiSchema, path: str, **params: Any) -> Any:
    match = schema.match("GET", path)
    assert match is not None, path
    spec, path_params = match
    token = cluster.tokens["root@pam!pvesim"]
    return sim_api.unwrap(
        sim_api.ROUTES[("GET", spec.path)](sim_api.Call(cluster, token, {**params, **path_params}, spec))
    )


def cluster_payload(
    guests: int, nodes: int = 20, seed: int = 1, concentrate: int = 0
) -> tuple[Cluster, dict[str, Any]]:
    cluster = build_cluster(generate(nodes=nodes, guests=guests, seed=seed, concentrate=concentrate))
    schema = ApiSchema(cluster.schema_version)
    names = list(cluster.nodes)
    payload: dict[str, Any] = {
        "now": cluster.clock.now(),
        "cluster_status": _call(cluster, schema, "/cluster/status"),
        "resources": _call(cluster, schema, "/cluster/resources"),
        "version": _call(cluster, schema, "/version"),
        "storage_config": _call(cluster, schema, "/storage"),
        "ha_status": _call(cluster, schema, "/cluster/ha/status/current"),
        "ha_resources": _call(cluster, schema, "/cluster/ha/resources"),
        "backup_jobs": _call(cluster, schema, "/cluster/backup"),
        "not_backed_up": _call(cluster, schema, "/cluster/backup-info/not-backed-up"),
        "replication_jobs": _call(cluster, schema, "/cluster/replication"),
        "node_status": {n: _call(cluster, schema, f"/nodes/{n}/status") for n in names},
        "node_storage": {n: _call(cluster, schema, f"/nodes/{n}/storage") for n in names},
        "tasks": [t for n in names for t in _call(cluster, schema, f"/nodes/{n}/tasks", source="all")],
        "certificates": {n: _call(cluster, schema, f"/nodes/{n}/certificates/info") for n in names},
        "repositories": {n: _call(cluster, schema, f"/nodes/{n}/apt/repositories") for n in names},
        "disks": {n: _call(cluster, schema, f"/nodes/{n}/disks/list") for n in names},
        "zfs": {n: _call(cluster, schema, f"/nodes/{n}/disks/zfs") for n in names},
        "configs": {
            str(g.vmid): _call(cluster, schema, f"/nodes/{g.node}/{g.type}/{g.vmid}/config")
            for g in cluster.guests.values()
        },
        "backups": [dict(r, storage="pbs") for r in _call(cluster, schema, f"/nodes/{names[0]}/storage/pbs/content")],
    }
    return cluster, payload
