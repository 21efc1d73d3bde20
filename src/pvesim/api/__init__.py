"""pvesim's API handlers, one module per area; importing this package registers them all."""

from pvesim.api import (  # noqa: F401
    access,
    accessitems,
    agent,
    ceph,
    cluster,
    clusterinfo,
    clusteritems,
    firewall,
    guests,
    ha,
    indexes,
    logs,
    monitoring,
    nodehealth,
    nodes,
    sdn,
    storage,
    system,
)
from pvesim.api.registry import ROUTES, ApiError, Call, Download, Result, unwrap

__all__ = ["ROUTES", "ApiError", "Call", "Download", "Result", "unwrap"]
