"""The principals file and the identity settings: every mistake named, nothing widened by accident."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pve_steward.security.authority import Grant, Principal
from pve_steward.security.identity import IdentityVerifier, OidcSettings, PrincipalsFile, load_principals
from pve_steward.security.tiers import Tier

SHA = hashlib.sha256(b"x" * 40).hexdigest()


def write(tmp_path: Path, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / "principals.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_bad_entry_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"tokens\.0\.tier: Input should be 'read_only', 'operator' or 'admin'"):
        load_principals(write(tmp_path, f'[[tokens]]\nname = "a"\nsha256 = "{SHA}"\ntier = "root"\n'))
    with pytest.raises(ValueError, match=r"tokens\.0\.sha256"):
        load_principals(write(tmp_path, '[[tokens]]\nname = "a"\nsha256 = "plain-token"\n'))
    with pytest.raises(ValueError, match="two static tokens share a name"):
        load_principals(write(tmp_path, f'[[tokens]]\nname = "a"\nsha256 = "{SHA}"\n' * 2))
    with pytest.raises(ValueError, match="not valid TOML"):
        load_principals(write(tmp_path, "[[tokens]\n"))


def test_a_readable_principals_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="accessible to group or others"):
        load_principals(write(tmp_path, "", mode=0o644))


def test_each_group_rule_is_a_grant_of_its_own_and_no_group_gets_the_default() -> None:
    """Rules are not mixed: admin on lab (one group) and operator on prod (another) give no admin on prod."""
    rules = PrincipalsFile.model_validate(
        {
            "default_tier": "read_only",
            "groups": [
                {"group": "ops", "tier": "operator", "clusters": ["prod"]},
                {"group": "admins", "tier": "admin", "clusters": ["lab"]},
            ],
        }
    )
    both = rules.oidc("https://idp.example", "erin", ["ops", "admins"])
    assert both.id == "oidc:https://idp.example#erin"
    assert both.refusal("guest_stop", Tier.ADMIN, "lab") is None
    assert both.refusal("guest_reboot", Tier.OPERATOR, "prod") is None
    refused = both.refusal("guest_stop", Tier.ADMIN, "prod")
    assert refused is not None and "no rule lets erin do this" in refused
    assert "group ops" in refused and "group admins" in refused
    nobody = rules.oidc("https://idp.example", "frank", ["staff"])
    assert [g.label for g in nobody.grants] == ["default_tier"]
    assert nobody.refusal("guest_reboot", Tier.OPERATOR, "prod") == (
        "guest_reboot needs tier operator; frank may use tier read_only (default_tier)"
    )
    assert nobody.refusal("list_guests", Tier.READ_ONLY, "prod") is None


def test_a_users_entry_decides_alone() -> None:
    rules = PrincipalsFile.model_validate(
        {
            "users": [{"subject": "gina", "tier": "read_only", "clusters": ["lab"], "deny_actions": ["get_*"]}],
            "groups": [{"group": "ops", "tier": "admin"}],
        }
    )
    gina = rules.oidc("https://idp.example", "gina", ["ops"])
    assert [g.label for g in gina.grants] == ["user gina"]
    assert gina.refusal("list_guests", Tier.READ_ONLY, "prod") == (
        "gina may not use cluster 'prod' (user gina allows clusters: lab)"
    )
    assert (
        gina.refusal("get_guest", Tier.READ_ONLY, "lab")
        == "get_guest is denied to gina (user gina: deny_actions 'get_*')"
    )
    assert gina.refusal("list_guests", Tier.READ_ONLY, "lab") is None


def test_the_file_is_checked_against_the_clusters_and_operations() -> None:
    rules = PrincipalsFile.model_validate(
        {"tokens": [{"name": "carol", "sha256": SHA, "clusters": ["lab"], "deny_actions": ["guest_stp"]}]}
    )
    with pytest.raises(ValueError, match=r"tokens\.0\.clusters: no cluster lab; clusters are: none \(this server"):
        rules.check([], ["guest_stop"])
    with pytest.raises(ValueError, match=r"tokens\.0\.deny_actions: 'guest_stp' matches no operation"):
        rules.check(["lab"], ["guest_stop"])
    rules.check(["lab", "prod"], ["guest_stp"])


def test_the_issuer_must_be_https_except_on_loopback() -> None:
    with pytest.raises(ValueError, match="oidc_issuer must be an https:// URL"):
        IdentityVerifier(PrincipalsFile(), OidcSettings(issuer="http://idp.example", audience="a"))
    IdentityVerifier(PrincipalsFile(), OidcSettings(issuer="http://127.0.0.1:9000", audience="a"))


@pytest.mark.anyio
async def test_a_static_token_is_matched_by_its_hash_and_named_in_its_namespace() -> None:
    rules = PrincipalsFile.model_validate({"tokens": [{"name": "carol", "sha256": SHA, "tier": "operator"}]})
    verifier = IdentityVerifier(rules, None)
    found = await verifier.verify_token("x" * 40)
    assert found is not None and found.client_id == "static:carol" and found.subject == "static:carol"
    principal = Principal.from_access(found)
    assert principal is not None and principal.name == "carol"
    assert principal.grants == (Grant(label="token carol", tier=Tier.OPERATOR),)
    assert await verifier.verify_token("y" * 40) is None
