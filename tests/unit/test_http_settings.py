"""HTTP start-up refusals and warnings: short bearer tokens, secret files others can read, the state dir."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from pve_steward.config import Settings, load_settings
from pve_steward.security.files import make_private_dir
from pve_steward.serving.http import bind_warnings, misdirected_body


def test_a_bearer_token_shorter_than_32_characters_is_refused() -> None:
    with pytest.raises(ValidationError, match="http_bearer_token must be at least 32 characters"):
        Settings(http_bearer_token=SecretStr("x" * 31))
    assert Settings(http_bearer_token=SecretStr("x" * 32)).http_bearer_token is not None


@pytest.mark.parametrize("blank", [" " * 40, "\t" * 40, "x" * 31 + " " * 9, " " + "x" * 39, "x" * 39 + "\n"])
def test_a_bearer_token_with_blank_characters_is_refused(blank: str) -> None:
    """Issue 42: a 40-space bearer token passed the length check."""
    with pytest.raises(ValidationError, match="must not contain spaces, tabs, line breaks or control characters"):
        Settings(http_bearer_token=SecretStr(blank))


def test_serve_with_a_short_bearer_token_exits_with_the_reason() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pve_steward", "serve", "--transport", "http", "--http-bearer-token", "short-token"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "http_bearer_token must be at least 32 characters" in done.stderr and "Traceback" not in done.stderr
    assert "short-token" not in done.stderr  # the rejected secret is not echoed


@pytest.mark.parametrize("setting", ["token_secret_file", "confirm_key_file"])
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_secret_file_others_can_read_is_refused(tmp_path: Path, setting: str, mode: int) -> None:
    secret = tmp_path / "secret"
    secret.write_text("k" * 40)
    secret.chmod(mode)
    with pytest.raises(
        ValidationError, match=rf"{setting} .* is accessible to group or others \(mode 0{mode:o}\).*chmod 600"
    ):
        Settings(**{setting: secret})  # type: ignore[arg-type]
    secret.chmod(0o600)
    assert getattr(Settings(**{setting: secret}), setting) == secret  # type: ignore[arg-type]


def test_the_state_dir_is_created_private(tmp_path: Path) -> None:
    state = make_private_dir(tmp_path / "a" / "pve-steward")
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert make_private_dir(state) == state


def test_listening_on_a_network_address_without_allowed_hosts_warns() -> None:
    token = SecretStr("t" * 40)
    (warning,) = bind_warnings(Settings(http_host="0.0.0.0", http_bearer_token=token))
    assert "--allowed-hosts" in warning
    assert bind_warnings(Settings(http_host="0.0.0.0", http_bearer_token=token, allowed_hosts=["mcp.lan:*"])) == []
    assert bind_warnings(Settings()) == []


def test_the_421_body_names_the_flag_and_does_not_echo_odd_hosts() -> None:
    assert b"--allowed-hosts mcp.lan:*" in misdirected_body("mcp.lan:8765")
    odd = misdirected_body("evil\r\nX-Injected: 1")
    assert b"X-Injected" not in odd and b"--allowed-hosts" in odd


def test_heavy_calls_go_to_a_diagnostics_process_only_when_asked_and_only_over_http(tmp_path: Path) -> None:
    """One process by default, over stdio and HTTP alike (design record 261206-60); a shared HTTP server may ask
    for the diagnostics process, and stdio, which has one caller, never runs one."""
    audit = tmp_path / "audit.jsonl"
    assert load_settings(url="pve.invalid:8006", transport="http", audit_log=audit).offload_heavy is False
    assert load_settings(url="pve.invalid:8006", transport="stdio", audit_log=audit).offload_heavy is False
    on = load_settings(url="pve.invalid:8006", transport="http", diagnostics_process=True, audit_log=audit)
    assert on.offload_heavy is True
    stdio = load_settings(url="pve.invalid:8006", transport="stdio", diagnostics_process=True, audit_log=audit)
    assert stdio.offload_heavy is False
