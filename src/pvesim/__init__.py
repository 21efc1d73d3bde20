"""pvesim: a Proxmox VE API simulator (HTTPS, API tokens, privileges, UPID tasks, scenarios, faults).

A separate package from pve_steward and never imported by it: the server talks to pvesim
over HTTPS exactly as it would to a real cluster, so tests against it are honest.
"""

from pvesim.scenario import build_cluster, builtin_scenarios, faults_from, load_scenario
from pvesim.server import SimServer

__all__ = ["SimServer", "build_cluster", "builtin_scenarios", "faults_from", "load_scenario", "start_scenario"]


def start_scenario(
    name: str = "demo", *, version: str | None = None, speed: float | None = None, port: int = 0
) -> SimServer:
    """Build a scenario and start it on a free port (the caller stops it, or uses ``with``)."""
    data = load_scenario(name)
    return SimServer(build_cluster(data, version=version, speed=speed), port=port, faults=faults_from(data)).start()
