"""Narrowing only takes away: action globs on top of tiers and toolsets, and request headers."""

from __future__ import annotations

import pytest

from pve_steward.config import load_settings
from pve_steward.security.narrowing import header_refusal
from pve_steward.security.tiers import Tier
from pve_steward.surface.registry import RegistryError, load_registry

REGISTRY = load_registry()


def names(**kw: object) -> set[str]:
    return {o.name for o in REGISTRY.select(tier=Tier.ADMIN, read_only=False, **kw)}  # type: ignore[arg-type]


def test_allow_and_deny_globs_narrow_the_registered_operations() -> None:
    every = names()
    allowed = names(allow=["list_*", "get_*"])
    assert allowed == {n for n in every if n.startswith(("list_", "get_"))} and "list_guests" in allowed
    denied = names(deny=["guest_stop", "snapshot_*"])
    assert denied == {n for n in every if n != "guest_stop" and not n.startswith("snapshot_")}
    assert "guest_start" in denied
    assert names(allow=["guest_*"], deny=["guest_stop"]) == {n for n in every if n.startswith("guest_")} - {
        "guest_stop"
    }  # deny wins over allow


def test_action_lists_never_widen_tiers_or_read_only() -> None:
    operator = {o.name for o in REGISTRY.select(tier=Tier.OPERATOR, read_only=False, allow=["guest_*"])}
    assert "guest_start" in operator and "guest_stop" not in operator  # guest_stop needs admin
    assert not [o for o in REGISTRY.select(tier=Tier.ADMIN, read_only=True, allow=["*"]) if o.is_write]


def test_a_glob_matching_nothing_is_refused_with_a_suggestion() -> None:
    with pytest.raises(
        RegistryError, match=r"deny_actions: 'guest_stpo' matches no operation \(did you mean 'guest_stop'"
    ):
        names(deny=["guest_stpo"])
    with pytest.raises(RegistryError, match=r"allow_actions: 'nothing_\*' matches no operation"):
        names(allow=["nothing_*"])


def test_settings_take_comma_separated_globs() -> None:
    settings = load_settings(allow_actions="list_*, get_*", deny_actions="guest_stop")
    assert settings.allow_actions == ["list_*", "get_*"] and settings.deny_actions == ["guest_stop"]


def test_headers_only_add_refusals() -> None:
    assert header_refusal(None, "guest_start", "guests", Tier.OPERATOR, True) is None
    ro = header_refusal({"x-pve-steward-read-only": "1"}, "guest_start", "guests", Tier.OPERATOR, True)
    assert ro is not None and "asked for read-only" in ro
    assert header_refusal({"x-pve-steward-read-only": "1"}, "list_guests", "guests", Tier.READ_ONLY, False) is None
    low = header_refusal({"x-pve-steward-tier": "read_only"}, "guest_start", "guests", Tier.OPERATOR, True)
    assert low is not None and "narrowed the tier to read_only" in low
    # asking for more than the server allows adds nothing: the server's own tier check still applies
    assert header_refusal({"x-pve-steward-tier": "admin"}, "guest_start", "guests", Tier.OPERATOR, True) is None
    bad = header_refusal({"x-pve-steward-tier": "root"}, "list_guests", "guests", Tier.READ_ONLY, False)
    assert bad is not None and "must be one of read_only, operator, admin" in bad
    sets = header_refusal({"x-pve-steward-toolsets": "tasks"}, "list_guests", "guests", Tier.READ_ONLY, False)
    assert sets is not None and "toolset guests" in sets
    deny = header_refusal({"x-pve-steward-deny-actions": "list_*"}, "list_guests", "guests", Tier.READ_ONLY, False)
    assert deny is not None and "X-Pve-Steward-Deny-Actions" in deny
