"""Configuration: precedence flags > env > TOML > defaults, validation messages, secrets never shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from pve_steward.cli import build_parser, main
from pve_steward.config import Settings, load_settings
from pve_steward.security.tiers import Tier

FP = "AB:" * 31 + "CD"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("PVE_STEWARD_"):
            monkeypatch.delenv(key)


def test_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "ops.toml"
    toml.write_text('url = "pve-file.lan"\ntimeout = 30\nconcurrency = 3\ntoolsets = ["cluster"]\n')
    monkeypatch.setenv("PVE_STEWARD_TIMEOUT", "20")
    monkeypatch.setenv("PVE_STEWARD_CONCURRENCY", "5")
    s = load_settings(toml, concurrency=7)
    assert s.url == "pve-file.lan"  # from the file
    assert s.timeout == 20  # env beats file
    assert s.concurrency == 7  # flag beats env
    assert s.toolsets == ["cluster"]


def test_normalisation_and_validation() -> None:
    s = Settings(url="https://pve1.lan:8006/api2/json", fingerprint=FP, token_id="ops@pve!mcp")
    assert s.url == "pve1.lan:8006"
    assert s.fingerprint == "ab" * 31 + "cd"
    with pytest.raises(ValidationError, match="only served over HTTPS"):
        Settings(url="http://pve1.lan")
    with pytest.raises(ValidationError, match="user@realm!tokenname"):
        Settings(token_id="root@pam")
    with pytest.raises(ValidationError, match="SHA-256 digest"):
        Settings(fingerprint="abc")
    with pytest.raises(ValidationError, match="contradict"):
        Settings(insecure=True, fingerprint=FP)
    with pytest.raises(ValidationError, match="either token_secret or token_secret_file"):
        Settings(token_secret=SecretStr("x"), token_secret_file=Path("/tmp/x"))
    assert Settings(read_only=True, tier=Tier.ADMIN).tier is Tier.READ_ONLY
    assert Settings(toolsets="cluster, guests").toolsets == ["cluster", "guests"]  # type: ignore[arg-type]
    assert Settings(thresholds="storage_warning_pct=75").thresholds == {"storage_warning_pct": 75.0}  # type: ignore


def test_secret_from_file_and_never_printed(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("3f1c9a7e-secret-value\n")
    secret_file.chmod(0o600)
    s = Settings(token_secret_file=secret_file)
    assert s.secret() == "3f1c9a7e-secret-value"
    direct = Settings(token_secret=SecretStr("3f1c9a7e-secret-value"))
    assert "3f1c9a7e" not in repr(direct) and "3f1c9a7e" not in str(direct)
    assert "3f1c9a7e" not in direct.model_dump_json()
    with pytest.raises(ValueError, match="cannot read token_secret_file"):
        Settings(token_secret_file=tmp_path / "missing").secret()


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--help"])
    out = capsys.readouterr().out
    for name in Settings.model_fields:
        assert "--" + name.replace("_", "-") in out
        assert "PVE_STEWARD_" + name.upper() in out


def test_bad_configuration_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--url", "http://pve1", "--token-id", "a@pam!b"]) == 2
    err = capsys.readouterr().err
    assert "invalid configuration" in err and "only served over HTTPS" in err and "Traceback" not in err
    assert main(["--config", "/nonexistent/ops.toml"]) == 2
    assert "does not exist" in capsys.readouterr().err
