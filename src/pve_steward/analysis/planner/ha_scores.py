"""HA's schedulers as pve-ha-manager scores nodes for a service it starts or moves (lower is better).

``basic`` counts the services on each node (src/PVE/HA/Usage/Basic.pm); ``static`` scores each node with
TOPSIS over the CPU and memory the services' configs assign, as if the service already ran there
(src/PVE/HA/Usage/Static.pm over proxmox-resource-scheduling pve_static.rs and topsis.rs). Both count the
services that hold a node (Usage.pm get_used_service_nodes); from pve-ha-manager 5.1.2 on they also count
running guests outside HA (Manager.pm recompute_online_node_usage, "add remaining non-HA resources").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pve_steward.analysis.pverules import pve_rule

# proxmox-resource-scheduling pve_static.rs PveTopsisAlternative: average CPU, highest CPU, average memory,
# highest memory, all minimised, weights 1, 2, 5, 10 (normalised by their sum)
_WEIGHTS = (1.0, 2.0, 5.0, 10.0)
_WEIGHT_SUM = sum(_WEIGHTS)


@dataclass(frozen=True, slots=True)
class Demand:
    """What a service asks of a node: ``cpu`` assigned CPUs (0: unlimited, counts the node's), ``mem`` bytes."""

    cpu: float
    mem: int


@dataclass(slots=True)
class NodeUse:
    maxcpu: int
    maxmem: int
    cpu: float = 0.0
    mem: int = 0
    services: set[str] = field(default_factory=set)


class Usage:
    """The usage of the HA-online nodes one scheduler keeps while the CRM places services one after another."""

    def __init__(self, mode: str, nodes: dict[str, tuple[int, int]]) -> None:
        """``nodes``: node -> (CPUs, memory bytes) as the node's static info gives them."""
        self.mode = mode
        self.nodes = {n: NodeUse(max(cpu, 1), max(mem, 1)) for n, (cpu, mem) in nodes.items()}

    def add(self, sid: str, node: str, demand: Demand) -> None:
        use = self.nodes.get(node)
        if use is None or sid in use.services:
            return
        use.services.add(sid)
        use.cpu += demand.cpu if demand.cpu > 0 else use.maxcpu  # pve_static.rs add_cpu_usage: 0 is unlimited
        use.mem += demand.mem

    @pve_rule(
        "ha.scheduler-score",
        rule="HA's 'basic' scheduler scores a node by the number of services it holds; 'static' scores every "
        "HA-online node by TOPSIS over the average and highest CPU and memory share of all nodes as if the service "
        "ran there (weights 1, 2, 5, 10); the node with the best score wins, ties by name. 'dynamic' scores live "
        "load, which a plan cannot know.",
        pve="pve-ha-manager src/PVE/HA/Usage/Basic.pm, Static.pm score_nodes_to_start_service; Manager.pm "
        "select_service_node; proxmox-resource-scheduling src/pve_static.rs score_nodes_to_start_service, "
        "src/topsis.rs score_alternatives",
        codes=("MIGRATE_CAPACITY",),
    )
    def scores(self, demand: Demand) -> dict[str, float]:
        """Node -> score for a service with ``demand`` (lower is better, as select_service_node sorts)."""
        if self.mode != "static":
            return {n: float(len(u.services)) for n, u in self.nodes.items()}
        names = sorted(self.nodes)
        rows = [self._alternative(target, names, demand) for target in names]
        return {n: -s for n, s in zip(names, _topsis(rows), strict=True)}

    def _alternative(self, target: str, names: list[str], demand: Demand) -> tuple[float, float, float, float]:
        cpus, mems = [], []
        for n in names:
            u = self.nodes[n]
            cpu, mem = u.cpu, u.mem
            if n == target:
                cpu += demand.cpu if demand.cpu > 0 else u.maxcpu
                mem += demand.mem
            cpus.append(cpu / u.maxcpu)
            mems.append(mem / u.maxmem)
        count = len(names)
        return (sum(cpus) / count, max(cpus), sum(mems) / count, max(mems))


def _topsis(rows: list[tuple[float, float, float, float]]) -> list[float]:
    """topsis.rs score_alternatives with every criterion minimised: closeness to the ideal worst, 0..1."""
    columns = list(zip(*rows, strict=True))
    norms = [math.sqrt(sum(v * v for v in col)) for col in columns]
    matrix = [[v / norms[i] if norms[i] else v for i, v in enumerate(row)] for row in rows]
    best = [min(col) for col in zip(*matrix, strict=True)]
    worst = [max(col) for col in zip(*matrix, strict=True)]
    out = []
    for row in matrix:
        to_best = math.sqrt(sum(((v - b) * w / _WEIGHT_SUM) ** 2 for v, b, w in zip(row, best, _WEIGHTS, strict=True)))
        to_worst = math.sqrt(
            sum(((v - x) * w / _WEIGHT_SUM) ** 2 for v, x, w in zip(row, worst, _WEIGHTS, strict=True))
        )
        total = to_best + to_worst
        out.append(0.0 if total == 0 else to_worst / total)
    return out
