"""pvesim's API handlers, one module per area; importing this package registers them all."""

from pvesim.api import access, agent, ceph, cluster, guests, ha, nodes, sdn, storage  # noqa: F401
from pvesim.api.registry import ROUTES, ApiError, Call

__all__ = ["ROUTES", "ApiError", "Call"]
