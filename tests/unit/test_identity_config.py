"""The principals file and the identity settings: every mistake named, nothing widened by accident."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

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


def test_groups_give_the_highest_tier_and_no_group_the_default() -> None:
    rules = PrincipalsFile.model_validate(
        {
            "default_tier": "read_only",
            "groups": [
                {"group": "ops", "tier": "operator", "clusters": ["prod"]},
                {"group": "admins", "tier": "admin", "clusters": ["lab"]},
            ],
        }
    )
    verifier = IdentityVerifier(rules, None)
    assert verifier._map_groups(["ops", "admins"]) == (Tier.ADMIN, ["lab", "prod"])
    assert verifier._map_groups(["ops"]) == (Tier.OPERATOR, ["prod"])
    assert verifier._map_groups(["staff"]) == (Tier.READ_ONLY, None)


def test_the_issuer_must_be_https_except_on_loopback() -> None:
    with pytest.raises(ValueError, match="oidc_issuer must be an https:// URL"):
        IdentityVerifier(PrincipalsFile(), OidcSettings(issuer="http://idp.example", audience="a"))
    IdentityVerifier(PrincipalsFile(), OidcSettings(issuer="http://127.0.0.1:9000", audience="a"))


@pytest.mark.anyio
async def test_a_static_token_is_matched_by_its_hash() -> None:
    rules = PrincipalsFile.model_validate({"tokens": [{"name": "carol", "sha256": SHA, "tier": "operator"}]})
    verifier = IdentityVerifier(rules, None)
    found = await verifier.verify_token("x" * 40)
    assert (
        found is not None
        and found.client_id == "carol"
        and found.claims
        == {
            "tier": "operator",
            "clusters": None,
            "source": "static",
        }
    )
    assert await verifier.verify_token("y" * 40) is None
