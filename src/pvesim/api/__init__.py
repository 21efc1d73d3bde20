"""pvesim's API handlers, one module per area; importing this package registers them all."""

from pvesim.api import (  # noqa: F401
    access,
    agent,
    ceph,
    cluster,
    firewall,
    guests,
    ha,
    monitoring,
    nodehealth,
    nodes,
    sdn,
    storage,
    system,
)
from pvesim.api.registry import ROUTES, ApiError, Call

__all__ = ["ROUTES", "ApiError", "Call"]
