"""Configuration: precedence flags > env > TOML > defaults, validation messages, secrets never shown."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from pve_steward.cli import COMMANDS, FILE_ONLY, build_parser, main
from pve_steward.config import ConfigError, Settings, load_settings
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
    assert "[clusters.NAME] tables" in out  # the one setting only a config file gives (FILE_ONLY)
    for name in set(Settings.model_fields) - set(FILE_ONLY):
        assert "--" + name.replace("_", "-") in out
        assert "PVE_STEWARD_" + name.upper() in out


def test_bad_configuration_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--url", "http://pve1", "--token-id", "a@pam!b"]) == 64
    err = capsys.readouterr().err
    assert "invalid configuration: url (--url): the PVE API is only served over HTTPS" in err
    assert "Traceback" not in err and "Value error" not in err
    assert main(["--config", "/nonexistent/ops.toml"]) == 64
    assert "does not exist" in capsys.readouterr().err


def test_a_flag_beats_the_environment_also_across_the_two_ways_of_giving_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file\n")
    secret_file.chmod(0o600)  # a secret file others can read is refused (261203-3)
    monkeypatch.setenv("PVE_STEWARD_TOKEN_SECRET_FILE", str(tmp_path / "missing"))
    flag = load_settings(token_secret=SecretStr("from-flag"))
    assert flag.secret() == "from-flag" and flag.token_secret_file is None
    monkeypatch.setenv("PVE_STEWARD_INSECURE", "1")
    assert load_settings(fingerprint=FP).insecure is False  # the flag's pin replaces the env's "insecure"

    toml = tmp_path / "ops.toml"
    toml.write_text('token_secret = "from-toml"\ninsecure = true\n')
    monkeypatch.delenv("PVE_STEWARD_INSECURE")
    monkeypatch.setenv("PVE_STEWARD_TOKEN_SECRET_FILE", str(secret_file))
    monkeypatch.setenv("PVE_STEWARD_FINGERPRINT", FP)
    env_over_file = load_settings(toml)
    assert env_over_file.secret() == "from-file" and env_over_file.token_secret is None
    assert env_over_file.insecure is False and env_over_file.fingerprint == "ab" * 31 + "cd"

    with pytest.raises(ValueError, match="either token_secret or token_secret_file"):  # one source giving both
        load_settings(token_secret=SecretStr("a"), token_secret_file=secret_file)


def test_config_file_errors_name_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('url = "pve1.lan"\ntimeout 30\n')
    with pytest.raises(ConfigError, match=rf"config file {re.escape(str(broken))} is not valid TOML: .*line 2"):
        load_settings(broken)
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('url = "pve1.lan"\ntoken-id = "ops@pve!mcp"\n')
    with pytest.raises(ConfigError, match=r"unknown\.toml: unknown setting 'token-id' \(did you mean 'token_id'\?\)"):
        load_settings(unknown)
    bad_value = tmp_path / "bad.toml"
    bad_value.write_text('timeout = "soon"\n')
    with pytest.raises(ConfigError, match=rf"timeout \(config file {re.escape(str(bad_value))}\): "):
        load_settings(bad_value)
    monkeypatch.setenv("PVE_STEWARD_TIMEOUT", "never")
    with pytest.raises(ConfigError, match=r"timeout \(env PVE_STEWARD_TIMEOUT\): "):
        load_settings(bad_value)


def help_of(capsys: pytest.CaptureFixture[str], *command: str) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    return capsys.readouterr().out


def test_each_command_lists_only_its_own_flags_in_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    commands: list[list[str]] = [[], ["serve"], ["demo"], ["check"], ["tools"]]
    top, serve, demo, check, tools = (help_of(capsys, *c) for c in commands)
    for text in (top, serve, demo, check, tools):
        assert "``" not in text and ":class:" not in text and ":func:" not in text
    assert "--url" not in top and "--tier" not in top and "serve" in top
    assert "{read_only,operator,admin}" in serve and "{stdio,http}" in serve and "default: 8765" in serve
    assert "default: on" in serve  # --verify-tls
    for flag in ("--url", "--token-id", "--token-secret", "--fingerprint", "--transport"):
        assert flag not in demo
    assert "--http-port" in demo and "--tier" in demo
    for flag in ("--tier", "--http-port", "--audit-log", "--transport", "--granular-tools"):
        assert flag not in check
    assert "--url" in check and "--thresholds" in check and "64 usage" in check
    assert "--url" not in tools and "--http-port" not in tools and "--tier" in tools


@pytest.mark.parametrize(
    ("variable", "value", "forms"),
    [
        ("PVE_STEWARD_ALLOWED_HOSTS", '["pve1.example"', r'a JSON list \(\["a", "b"\]\) or values separated by commas'),
        ("PVE_STEWARD_THRESHOLDS", "{storage_warn", r"a JSON object or name=value pairs separated by commas"),
        ("PVE_STEWARD_SUPPRESS", "[{code", r"it as JSON \(as the config file's table would be\)"),
    ],
)
def test_an_environment_value_that_is_not_json_is_named_with_the_forms_it_takes(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, forms: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=rf"\(env {variable}\): not valid JSON; give {forms}"):
        load_settings()


def test_a_list_setting_takes_a_json_list_or_commas_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PVE_STEWARD_ALLOWED_HOSTS", '["a.example", "b.example"]')
    assert load_settings().allowed_hosts == ["a.example", "b.example"]
    monkeypatch.setenv("PVE_STEWARD_ALLOWED_HOSTS", "a.example, b.example")
    assert load_settings().allowed_hosts == ["a.example", "b.example"]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["serve"],
        ["serve", "--url", "pve1:8006", "--no-verify-tls", "--timeout", "7"],
        ["--url", "pve1", "--granular-tools"],
        ["--url", "pve1", "serve", "--timeout", "9"],
        ["demo", "--stdio", "--granular-tools", "--tier", "admin"],
        ["check", "--json", "--areas", "backups", "--url", "pve1"],
        ["tools", "--json", "--granular-tools"],
        ["audit", "verify", "--json"],
        ["--tools-file", "check"],
    ],
)
def test_a_start_parses_its_command_line_as_the_full_parser_does(argv: list[str]) -> None:
    """A start builds the settings' flags of its own command only (issue 43): every command line reads as the
    parser with every command's flags reads it."""
    lean, full = build_parser(argv).parse_args(argv), build_parser().parse_args(argv)
    given = {k: v for k, v in vars(full).items() if v is not None}
    assert {k: v for k, v in vars(lean).items() if v is not None} == given
    assert lean.func is full.func


@pytest.mark.parametrize("argv", [["serve", "--no-such-flag"], ["check", "--json", "--bogus", "1"], ["--bogus"]])
def test_a_lean_parser_refuses_what_the_full_one_refuses(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    for parser in (build_parser(argv), build_parser()):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(argv)
        assert exc.value.code == 64
    lean_err, full_err = capsys.readouterr().err.split("pve-steward: error:")[1:]
    assert lean_err.split("\n")[0] == full_err.split("\n")[0]


def test_the_lean_parser_knows_every_command() -> None:
    """A command missing from COMMANDS would be parsed without its settings' flags."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands.choices) == set(COMMANDS)
