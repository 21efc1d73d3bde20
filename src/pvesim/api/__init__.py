"""pvesim's API handlers, one module per area; importing this package registers them all."""

from pvesim.api import (  # noqa: F401
    access,
    accessitems,
    agent,
    ceph,
    cephextra,
    cluster,
    clusterconf,
    clusterinfo,
    clusteritems,
    disks,
    firewall,
    guestextra,
    guests,
    ha,
    indexes,
    logs,
    monitoring,
    nodeextra,
    nodehealth,
    nodes,
    rrd,
    sdn,
    sdnextra,
    storage,
    storageextra,
    system,
)
from pvesim.api.registry import ROUTES, ApiError, Call, Download, Result, unwrap

__all__ = ["ROUTES", "ApiError", "Call", "Download", "Result", "unwrap"]
