"""Write tiers: what an operation can break decides the lowest configuration that registers it.

``read_only`` registers no writes; ``operator`` adds reversible, guest-scoped actions (power on,
graceful shutdown, snapshots, backup now, migration); ``admin`` adds what can lose data or state
(hard stop, reset, snapshot rollback and delete).
"""

from __future__ import annotations

from enum import StrEnum


class Tier(StrEnum):
    READ_ONLY = "read_only"
    OPERATOR = "operator"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def allows(self, needed: Tier) -> bool:
        return self.rank >= needed.rank


_RANK = {Tier.READ_ONLY: 0, Tier.OPERATOR: 1, Tier.ADMIN: 2}
