"""[clusters.NAME] tables: parsed into per-cluster settings; a bad table is one clear sentence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pve_steward.config import ConfigError, load_settings
from pve_steward.pveio.clusters import cluster_targets, registration_tier
from pve_steward.security.tiers import Tier

FP = "ab" * 32


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("PVE_STEWARD_"):
            monkeypatch.delenv(key)


def _secret(tmp_path: Path, name: str = "secret") -> Path:
    path = tmp_path / name
    path.write_text("0b1c2d3e-secret\n")
    path.chmod(0o600)
    return path


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "steward.toml"
    path.write_text(text)
    return path


def two_clusters(tmp_path: Path, extra: str = "") -> str:
    secret = _secret(tmp_path)
    return f"""
tier = "admin"
[clusters.prod]
url = "https://pve-prod.lan:8006"
token_id = "ops@pve!mcp"
token_secret_file = "{secret}"
fingerprint = "{FP}"
max_tier = "operator"
[clusters.lab]
url = "pve-lab.lan"
token_id = "lab@pve!mcp"
token_secret_file = "{secret}"
{extra}
"""


def test_tables_become_per_cluster_settings_in_file_order(tmp_path: Path) -> None:
    settings = load_settings(_file(tmp_path, two_clusters(tmp_path)))
    targets = cluster_targets(settings)
    assert [t.name for t in targets] == ["prod", "lab"]
    prod, lab = targets
    assert (prod.settings.url, prod.settings.token_id, prod.settings.fingerprint) == (
        "pve-prod.lan:8006",
        "ops@pve!mcp",
        FP,
    )
    assert (lab.settings.url, lab.settings.token_id, lab.settings.fingerprint) == ("pve-lab.lan", "lab@pve!mcp", None)
    assert prod.settings.secret() == "0b1c2d3e-secret"
    # The server's tier stays on the settings; the ceiling caps what runs on the cluster and its client.
    assert prod.settings.tier is Tier.ADMIN and prod.tier is Tier.OPERATOR
    assert prod.client_settings.tier is Tier.OPERATOR and lab.client_settings.tier is Tier.ADMIN
    assert registration_tier(settings, targets) is Tier.ADMIN
    assert prod.settings.clusters == {}  # a cluster's own settings name no other cluster


def test_the_highest_ceiling_decides_what_is_registered(tmp_path: Path) -> None:
    settings = load_settings(
        _file(tmp_path, two_clusters(tmp_path).replace('token_id = "lab', 'max_tier = "read_only"\ntoken_id = "lab'))
    )
    assert registration_tier(settings, cluster_targets(settings)) is Tier.OPERATOR
    assert (
        registration_tier(settings.model_copy(update={"tier": Tier.READ_ONLY}), cluster_targets(settings))
        is Tier.READ_ONLY
    )


def test_single_cluster_settings_have_no_targets() -> None:
    assert cluster_targets(load_settings(url="pve.lan", token_id="ops@pve!mcp")) == []


def test_a_cluster_defined_twice_is_named(tmp_path: Path) -> None:
    text = two_clusters(tmp_path) + '[clusters.prod]\nurl = "other.lan"\n'
    with pytest.raises(ConfigError, match=r"cluster 'prod' is defined twice \(again at line \d+\)"):
        load_settings(_file(tmp_path, text))


def test_cluster_names_must_be_plain_lowercase(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    table = {"url": "a.lan", "token_id": "ops@pve!mcp", "token_secret_file": str(secret)}
    with pytest.raises(ConfigError, match="cluster name 'Prod' must be 1-32 lowercase"):
        load_settings(clusters={"Prod": table, "prod": table})  # so two names never differ only in case
    with pytest.raises(ConfigError, match="cluster name 'my prod' must be"):
        load_settings(clusters={"my prod": table})


def test_a_missing_secret_file_names_the_cluster_and_the_file(tmp_path: Path) -> None:
    text = two_clusters(tmp_path).replace(str(tmp_path / "secret"), str(tmp_path / "nope"), 1)
    with pytest.raises(ConfigError) as err:
        load_settings(_file(tmp_path, text))
    message = str(err.value)
    assert "clusters.prod" in message and str(tmp_path / "nope") in message and "does not exist" in message
    assert "clusters.lab" not in message


def test_an_exposed_secret_file_is_refused(tmp_path: Path) -> None:
    text = two_clusters(tmp_path)
    (tmp_path / "secret").chmod(0o644)
    with pytest.raises(ConfigError, match=r"clusters\.prod.*accessible to group or others"):
        load_settings(_file(tmp_path, text))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("max_tier = 'root'", r"clusters\.lab\.max_tier.*'read_only', 'operator' or 'admin'"),
        ("colour = 'red'", r"clusters\.lab\.colour.*[Ee]xtra inputs"),
        ("fingerprint = 'abc'", r"clusters\.lab\.fingerprint.*SHA-256"),
        ("token_secret = 'x'", r"clusters\.lab.*exactly one of token_secret_file or token_secret"),
        ("[clusters.lab.pbs]\ncolour = 'x'", r"clusters\.lab\.pbs: unknown PBS setting\(s\) pbs_colour"),
    ],
)
def test_a_bad_table_names_the_cluster_and_the_key(tmp_path: Path, extra: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_settings(_file(tmp_path, two_clusters(tmp_path, extra)))


def test_cluster_tables_and_single_cluster_settings_do_not_mix(tmp_path: Path) -> None:
    text = 'url = "pve.lan"\n' + two_clusters(tmp_path)
    with pytest.raises(ConfigError, match=r"\[clusters\.\*\] tables replace url"):
        load_settings(_file(tmp_path, text))


def test_a_missing_url_or_token_names_the_cluster(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    with pytest.raises(ConfigError, match=r"clusters\.lab\.url.*Field required"):
        load_settings(clusters={"lab": {"token_id": "ops@pve!mcp", "token_secret_file": str(secret)}})
