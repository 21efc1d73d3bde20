"""Which guests must keep running through a maintenance window (production) and which may be stopped.

PVE has no notion of production, so this is our heuristic, documented (design record 261206-53) and
overridable per plan. In order, the first that applies decides:

1. the request: ``keep_running`` vmids/tags make a guest production, ``may_stop`` vmids/tags non-production
   (a vmid beats a tag; keeping beats stopping);
2. HA: a guest in HA (any requested state but ignored) is production and never stopped for a window;
3. protection=1 or a production word (prod, production, prd, live, critical, important, essential) as a tag,
   the pool or a word of the name: production;
4. a non-production word (test, testing, dev, devel, development, staging, stage, sandbox, lab, demo, tmp, temp,
   scratch, playground, poc, qa, uat, nonprod, non-prod, experimental, trial) as a tag, the pool or a word of the
   name: non-production;
5. anything else: production (in doubt, a guest keeps running).

onboot does not decide, it orders: among guests of one kind, one that does not start at boot is stopped first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from pve_steward.analysis.data import ClusterData

PRODUCTION_WORDS = frozenset({"prod", "production", "prd", "live", "critical", "important", "essential"})
NON_PRODUCTION_WORDS = frozenset(
    {
        "test",
        "testing",
        "dev",
        "devel",
        "development",
        "staging",
        "stage",
        "sandbox",
        "lab",
        "demo",
        "tmp",
        "temp",
        "scratch",
        "playground",
        "poc",
        "qa",
        "uat",
        "nonprod",
        "non-prod",
        "experimental",
        "trial",
    }
)
_WORD = re.compile(r"[a-z]+")
_TAG_SPLIT = re.compile(r"[;,\s]+")


@dataclass(frozen=True)
class Overrides:
    """What the request says: vmids and tags to keep running, and to allow stopping."""

    keep_vmids: frozenset[int] = frozenset()
    keep_tags: frozenset[str] = frozenset()
    stop_vmids: frozenset[int] = frozenset()
    stop_tags: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        keep_vmids: Iterable[int] = (),
        keep_tags: Iterable[str] = (),
        stop_vmids: Iterable[int] = (),
        stop_tags: Iterable[str] = (),
    ) -> Overrides:
        return cls(
            frozenset(keep_vmids),
            frozenset(t.lower() for t in keep_tags),
            frozenset(stop_vmids),
            frozenset(t.lower() for t in stop_tags),
        )


@dataclass(frozen=True)
class Class:
    """A guest's class: production or not, why (our words), and the cluster text that said so."""

    production: bool
    why: str
    signals: tuple[str, ...] = field(default_factory=tuple)
    onboot: bool | None = None  # None: its config was not read


def _says(text: str) -> bool | None:
    """What one tag, pool or name says: True production, False non-production, None nothing. The whole text
    first ('non-prod'), then its words ('web-staging-01'); a production word outweighs a non-production one."""
    low = text.lower()
    if low in NON_PRODUCTION_WORDS or low in PRODUCTION_WORDS:
        return low in PRODUCTION_WORDS
    words = set(_WORD.findall(low))
    if words & PRODUCTION_WORDS:
        return True
    return False if words & NON_PRODUCTION_WORDS else None


def _signals(texts: dict[str, list[str]]) -> list[tuple[str, bool]]:
    """The signals (``tag x``, ``pool y``, ``name z``) that say something, and what: production or not."""
    return [(f"{kind} {t}", said) for kind, values in texts.items() for t in values if (said := _says(t)) is not None]


def classify(data: ClusterData, vmid: int, overrides: Overrides) -> Class:
    """The class of one guest (see the module's rules), once per snapshot and request."""
    memo = data.memo["production"]
    key = (vmid, overrides)
    if key not in memo:
        memo[key] = _classify(data, vmid, overrides)
    return memo[key]  # type: ignore[no-any-return]


def _in_ha(data: ClusterData) -> frozenset[str]:
    """The vmids (as text) of HA resources not ignored, whatever the disarm mode."""
    memo = data.memo["production"]
    if "ha" not in memo:
        memo["ha"] = frozenset(
            str(sid).partition(":")[2] for sid, res in data.ha_by_sid.items() if res.get("state") != "ignored"
        )
    return memo["ha"]  # type: ignore[no-any-return]


def _classify(data: ClusterData, vmid: int, overrides: Overrides) -> Class:
    row = data.guests.get(vmid) or {}
    cfg = data.parsed.get(vmid)
    raw = data.configs.get(vmid) or {}
    tags = list(cfg.tags) if cfg is not None else [t for t in _TAG_SPLIT.split(str(row.get("tags") or "")) if t]
    onboot = cfg.onboot if cfg is not None else None
    lowered = {t.lower() for t in tags}
    if vmid in overrides.keep_vmids:
        return Class(True, "production: listed to keep running in the request", (), onboot)
    if vmid in overrides.stop_vmids:
        return Class(False, "non-production: listed as stoppable in the request", (), onboot)
    if kept := sorted(lowered & overrides.keep_tags):
        return Class(True, "production: a tag the request keeps running", tuple(f"tag {t}" for t in kept), onboot)
    if stoppable := sorted(lowered & overrides.stop_tags):
        return Class(
            False, "non-production: a tag the request allows to stop", tuple(f"tag {t}" for t in stoppable), onboot
        )
    if str(vmid) in _in_ha(data):
        return Class(True, "production: HA-managed (never stopped for a window)", (), onboot)
    texts = {"tag": tags, "pool": [str(row["pool"])] if row.get("pool") else [], "name": [str(row.get("name") or "")]}
    if str(raw.get("protection", "0")) == "1":
        return Class(True, "production: protection is set", (), onboot)
    said = _signals(texts)
    if prod := [text for text, production in said if production]:
        return Class(True, "production: its tags, pool or name say so", tuple(prod), onboot)
    if said:
        return Class(False, "non-production: its tags, pool or name say so", tuple(t for t, _ in said), onboot)
    return Class(True, "production: nothing says otherwise (in doubt, a guest keeps running)", (), onboot)


def stop_order(cls: Class, memory: int, vmid: int) -> tuple[bool, bool, int, int]:
    """Non-production first; then a guest that does not start at boot; then the largest (fewer stops)."""
    return (cls.production, cls.onboot is not False, -memory, vmid)
