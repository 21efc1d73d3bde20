"""What a migratability verdict is made of: reasons, per-target verdicts, and the basis it stands on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from pve_steward.models import MarkedDataclass, Untrusted

Mode = Literal["live", "offline", "restart"]
Verdict = Literal["live", "offline", "restart", "blocked"]
Basis = Literal["config", "config+pve"]
RANK: dict[str | None, int] = {"live": 3, "offline": 2, "restart": 2, None: 0}


@dataclass(slots=True)
class Reason(MarkedDataclass):
    code: Annotated[str, Field(description="MIGRATE_* finding code")]
    blocking: bool
    detail: Untrusted  # our sentence quoting cluster names and values: marked whole
    keys: Annotated[list[str], Field(description="config keys involved")] = field(default_factory=list)
    # blocks only a live move (a running VM can still move once stopped); the code and detail say so in
    # the output, so these bookkeeping fields stay out of it (bounded answers on large clusters)
    live_only: Annotated[bool, Field(exclude=True)] = False
    rule: Annotated[str, Field(exclude=True)] = ""  # the rule (docs/rules.md) whose 'not provable' PVE may settle


@dataclass(slots=True)
class TargetVerdict(MarkedDataclass):
    """One or more target nodes on which the guest fares identically."""

    nodes: list[Untrusted]
    mode: Annotated[Mode | None, Field(description="how it would move there; null when it cannot")] = None
    reasons: list[Reason] = field(default_factory=list)


@dataclass(slots=True)
class Migratability(MarkedDataclass):
    vmid: int
    name: Untrusted
    type: Literal["qemu", "lxc"]
    node: Untrusted
    status: str
    verdict: Verdict
    ha_managed: bool = False
    basis: Annotated[
        Basis,
        Field(
            description="config: derived from the guest config, storage config and cluster resources the way "
            "qemu-server/pve-container decide; config+pve: also cross-checked with PVE's own migrate precondition"
        ),
    ] = "config"
    memory_bytes: Annotated[int, Field(description="configured memory (what a target must reserve)")] = 0
    local_disk_bytes: Annotated[int, Field(description="bytes a move would copy")] = 0
    reasons: Annotated[list[Reason], Field(description="guest-wide reasons")] = field(default_factory=list)
    targets: list[TargetVerdict] = field(default_factory=list)

    @property
    def blocking(self) -> list[Reason]:
        out = [r for r in self.reasons if r.blocking]
        if self.verdict == "blocked" and not out:
            codes: dict[str, Reason] = {}
            for t in self.targets:
                for r in t.reasons:
                    if r.blocking:
                        codes.setdefault(r.code, r)
            out = list(codes.values())
        return out

    def target(self, node: str) -> TargetVerdict | None:
        return next((t for t in self.targets if node in t.nodes), None)

    def movable_to(self) -> list[str]:
        return sorted(n for t in self.targets if t.mode for n in t.nodes)


# the ``rule`` of a reason that stands only on what this token cannot see (a storage its /storage list leaves out):
# "not provable", never "cannot move" (pve/visibility.py)
NOT_VISIBLE = "not-visible-to-this-token"


def reason(
    code: str, blocking: bool, detail: str, keys: list[str] | None = None, live_only: bool = False, rule: str = ""
) -> Reason:
    return Reason(code=code, blocking=blocking, detail=detail, keys=keys or [], live_only=live_only, rule=rule)
