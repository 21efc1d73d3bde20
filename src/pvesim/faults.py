"""Faults on demand: latency, error rates, offline nodes, slow endpoints, dropped connections.

Set from a scenario's ``faults:`` block or at run time through the control API
(``PUT /_sim/faults``). Patterns are regular expressions searched in the API path
(without ``/api2/json``).
"""

from __future__ import annotations

import random
import re
from typing import Any

from pydantic import BaseModel, Field

from pvesim.bound import Bound


class ErrorRule(BaseModel):
    pattern: str
    rate: float = Field(1.0, ge=0, le=1)
    status: int = 500
    message: str = "simulated failure"
    methods: list[str] | None = None


class SlowRule(BaseModel):
    pattern: str
    delay: float = Field(ge=0)


class DropRule(BaseModel):
    pattern: str
    rate: float = Field(1.0, ge=0, le=1)


class Faults(BaseModel):
    latency: float = Field(
        0.0,
        ge=0,
        description="the least time from a request's arrival to its answer, seconds. The simulator handles the "
        "request on arrival (its own work counts toward the latency) and holds the answer until it is due: a write "
        "shows before its answer does, and a fault rule set meanwhile does not apply to a request already handled",
    )
    jitter: float = Field(0.0, ge=0, description="uniform random extra latency, seconds")
    errors: list[ErrorRule] = Field(default_factory=list)
    slow: list[SlowRule] = Field(default_factory=list)
    drop: list[DropRule] = Field(default_factory=list)
    seed: int | None = None
    pveproxy: Bound | None = Field(
        None,
        description="PVE's workers per node and cost per request (bound.py); replaces the latency model when set",
    )

    def model_post_init(self, context: Any, /) -> None:
        self._rng = random.Random(self.seed)

    def delay_for(self, path: str) -> float:
        extra = sum(r.delay for r in self.slow if re.search(r.pattern, path))
        jitter = self._rng.uniform(0, self.jitter) if self.jitter else 0.0
        return self.latency + jitter + extra

    def error_for(self, method: str, path: str) -> ErrorRule | None:
        for rule in self.errors:
            matches = (rule.methods is None or method in rule.methods) and re.search(rule.pattern, path)
            if matches and (rule.rate >= 1 or self._rng.random() < rule.rate):
                return rule
        return None

    def drop_for(self, path: str) -> bool:
        return any(re.search(r.pattern, path) and (r.rate >= 1 or self._rng.random() < r.rate) for r in self.drop)
