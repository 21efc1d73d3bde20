"""Issue 46's errors and words, as a newcomer meets them: each is one sentence with its fix, or is gone.

The environment: an empty ``PVE_STEWARD_*`` variable is unset, a misspelt one is refused with the closest
real name, a list or table setting in JSON works or says what it takes. ``check --html`` to a path it cannot
write says so before the check runs. Then the wording list, and the phrases that must not come back.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from pve_steward.cli import main
from pve_steward.config import (
    CONFIG_VARIABLE,
    ConfigError,
    Settings,
    env_names,
    env_variable,
    load_settings,
    unknown_env,
)
from pve_steward.errors import PvePermissionError, advice
from pve_steward.pveio.compat import UnsupportedVersion, check_version

ROOT = Path(__file__).resolve().parents[2]
FP = "AB:" * 31 + "CD"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.upper().startswith("PVE_STEWARD_"):
            monkeypatch.delenv(key)


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the command; it must fail with exit 64 and one line on stderr, no traceback."""
    assert main(argv) == 64
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


# --- the environment


def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client config or a bundle leaves an optional variable blank; that is "not given", not "given empty"."""
    for name in ("URL", "TOKEN_ID", "FINGERPRINT", "CA_FILE", "TIER", "TIMEOUT", "ALLOWED_HOSTS", "SUPPRESS"):
        monkeypatch.setenv(f"PVE_STEWARD_{name}", "")
    monkeypatch.setenv("PVE_STEWARD_CONFIG", "")
    settings = load_settings()
    defaults = Settings()
    assert (settings.url, settings.token_id, settings.fingerprint, settings.ca_file) == (None, None, None, None)
    assert (settings.tier, settings.timeout, settings.allowed_hosts) == (defaults.tier, defaults.timeout, [])
    assert env_names() == {}  # and nothing reports an empty variable as the source of a value


def test_an_empty_variable_beside_the_other_form_of_a_setting_is_no_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    monkeypatch.setenv("PVE_STEWARD_TOKEN_SECRET", "")
    monkeypatch.setenv("PVE_STEWARD_TOKEN_SECRET_FILE", str(secret))
    monkeypatch.setenv("PVE_STEWARD_INSECURE", "")
    monkeypatch.setenv("PVE_STEWARD_FINGERPRINT", FP)
    settings = load_settings()
    assert settings.secret() == "s3cret" and settings.insecure is False


@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("PVE_STEWARD_URLL", "PVE_STEWARD_URL"),
        ("PVE_STEWARD_READ_ONY", "PVE_STEWARD_READ_ONLY"),
        ("PVE_STEWARD_TOKEN_SECRETFILE", "PVE_STEWARD_TOKEN_SECRET_FILE"),
        ("PVE_STEWARD_HTTP_PROT", "PVE_STEWARD_HTTP_PORT"),
        ("PVE_STEWARD_CONFIGFILE", "PVE_STEWARD_CONFIG"),
        ("pve_steward_tier", None),  # the environment is read without regard to case: so is this check
    ],
)
def test_a_misspelt_variable_is_refused_with_the_closest_real_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], variable: str, closest: str | None
) -> None:
    monkeypatch.setenv(variable, "1")
    if closest is None:  # a known name in another case: pydantic-settings reads it, so it is not unknown
        assert unknown_env() is None
        return
    with pytest.raises(ConfigError) as refused:
        load_settings()
    message = str(refused.value)
    assert message.startswith(f"unknown environment variable {variable} (did you mean {closest}?)")
    assert message.endswith("correct the name or unset it") and "\n" not in message
    assert one_line_error(capsys, ["tools"]) == f"pve-steward: {message}"


# Names our own files use as misspellings, on purpose: the refusal's docstring and the changelog's example.
SHOWN_MISSPELT = {"PVE_STEWARD_READ_ONY", "PVE_STEWARD_SOME_OPTION"}


def test_every_variable_our_files_name_is_one_the_server_accepts() -> None:
    """A bench, script, chart or page that sets a variable the server refuses stops at start: bench_mechanisms
    passed PVE_STEWARD_BENCH_WITHOUT to its variants, and failed once unknown variables were refused."""
    real = {env_variable(name) for name in Settings.model_fields} | {CONFIG_VARIABLE}
    places = [ROOT / d for d in ("bench", "scripts", "deploy", "docs", "src")]
    files = [
        p
        for d in places
        for p in d.rglob("*")
        if p.is_file()
        and p.suffix in {".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".json", ".tpl", ".txt", ".html", ""}
    ]
    files += [ROOT / f for f in ("README.md", "DEVELOPERS.md", "CONTRIBUTING.md", "Dockerfile", "server.json")]
    named = {
        (str(p.relative_to(ROOT)), m)
        for p in files
        for m in re.findall(r"\bPVE_STEWARD_[A-Z0-9_]*[A-Z0-9]\b", p.read_text(errors="replace"))
    }
    assert len({m for _, m in named}) > 20  # the scan reads the files that set them
    assert sorted((f, m) for f, m in named if m not in real | SHOWN_MISSPELT) == []


def test_several_misspelt_variables_are_named_together_and_an_empty_one_is_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PVE_STEWARD_TEIR", "admin")
    monkeypatch.setenv("PVE_STEWARD_XYZZY", "1")
    monkeypatch.setenv("PVE_STEWARD_UNUSED", "")
    assert unknown_env() == (
        "unknown environment variables PVE_STEWARD_TEIR (did you mean PVE_STEWARD_TIER?), PVE_STEWARD_XYZZY: "
        "PVE_STEWARD_* variables are the settings' names in capitals (see pve-steward serve --help); correct the "
        "name or unset it"
    )


STRUCTURED = {  # every setting that takes a list or a table, with a good JSON value and what it becomes
    "toolsets": ('["cluster", "guests"]', ["cluster", "guests"]),
    "disable_toolsets": ('["tasks"]', ["tasks"]),
    "allowed_hosts": ('["mcp.lan:*"]', ["mcp.lan:*"]),
    "allow_actions": ('["list_*", "get_*"]', ["list_*", "get_*"]),
    "deny_actions": ('["guest_stop"]', ["guest_stop"]),
    "thresholds": ('{"storage_warning_pct": 75}', {"storage_warning_pct": 75.0}),
    "suppress": ('[{"code": "BACKUP_STALE", "vmid": 104, "reason": "retired"}]', None),
    "clusters": (
        '{"lab": {"url": "pve1.lab", "token_id": "ops@pve!mcp", "token_secret": "s", "fingerprint": "' + FP + '"}}',
        None,
    ),
}


def test_every_list_or_table_setting_is_covered() -> None:
    structured = {
        name for name, field in Settings.model_fields.items() if re.search(r"\b(list|dict)\[", str(field.annotation))
    }
    assert structured == set(STRUCTURED)


@pytest.mark.parametrize("name", sorted(STRUCTURED))
def test_a_list_or_table_setting_given_as_json_in_the_environment_works(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    text, expected = STRUCTURED[name]
    monkeypatch.setenv(f"PVE_STEWARD_{name.upper()}", text)
    value: Any = getattr(load_settings(), name)
    if expected is not None:
        assert value == expected
    else:
        assert len(value) == 1


TABLES = ("thresholds", "clusters")


@pytest.mark.parametrize("name", sorted(STRUCTURED))
@pytest.mark.parametrize("broken", ["unclosed", "wrong shape"])
def test_a_list_or_table_setting_in_broken_json_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, broken: str
) -> None:
    table = name in TABLES
    value = {"unclosed": '{"unclosed": 1' if table else '["unclosed"', "wrong shape": "[1, 2]" if table else "[[1]]"}
    monkeypatch.setenv(f"PVE_STEWARD_{name.upper()}", value[broken])
    err = one_line_error(capsys, ["tools"])
    assert err.startswith("pve-steward: invalid configuration: ") and f"(env PVE_STEWARD_{name.upper()})" in err
    assert "pydantic" not in err and "SettingsError" not in err and "EnvSettingsSource" not in err


# --- check --html to a path it cannot write


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("missing-dir/report.html", "the directory {tmp}/missing-dir does not exist"),
        (".", "it is a directory"),
        ("a-file/report.html", "the directory {tmp}/a-file does not exist"),
    ],
)
def test_check_html_to_a_path_it_cannot_write_is_one_sentence_before_the_check_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, why: str
) -> None:
    (tmp_path / "a-file").write_text("")
    path = tmp_path / target if target != "." else tmp_path
    argv = ["check", "--html", str(path), "--url", "192.0.2.1:1", "--token-id", "ops@pve!mcp"]
    argv += ["--token-secret", "s", "--fingerprint", FP]  # no cluster answers there: the path is refused first
    err = one_line_error(capsys, argv)
    expected = why.replace("{tmp}", str(tmp_path))
    assert err.startswith(f"pve-steward check: cannot write the HTML report to {path}: {expected}")
    assert "give --html a file in a directory you can write to" in err


def test_check_html_refusal_is_json_with_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["check", "--json", "--html", str(tmp_path / "no" / "r.html")]) == 64
    body = json.loads(capsys.readouterr().out)
    assert body["error"]["kind"] == "usage" and "cannot write the HTML report" in body["error"]["message"]


# --- the wording list


def test_a_too_old_pve_asks_for_a_cluster_upgrade_and_a_too_new_one_for_ours() -> None:
    with pytest.raises(UnsupportedVersion) as old:
        check_version("7.4.17")
    with pytest.raises(UnsupportedVersion) as new:
        check_version("10.0.1")
    assert "upgrade the cluster to 8.0 or later" in str(old.value) and "pve-steward," not in str(old.value)
    assert "newer than this pve-steward supports" in str(new.value) and "upgrade pve-steward" in str(new.value)
    assert check_version("8.4.14") == (8, 4) and check_version("9.1.2") == (9, 1)


def test_a_privilege_only_administrator_holds_gets_a_role_of_its_own() -> None:
    """node_updates needs Sys.Modify: granting Administrator for it would hand out every privilege."""
    err = PvePermissionError("Permission check failed (/nodes/pve1, Sys.Modify)")
    fix = advice(err)
    assert "Administrator on" not in fix and "--roles Administrator" not in fix
    assert "pveum role add SysModify --privs Sys.Modify" in fix and "--roles SysModify" in fix
    assert "on /nodes" in fix
    plain = advice(PvePermissionError("Permission check failed (/vms/100, VM.PowerMgmt)"))
    assert "grant PVEVMUser on /vms" in plain


def test_the_certificate_message_is_a_whole_sentence() -> None:
    from pve_steward.analysis.operations import _certificate_finding
    from pve_steward.analysis.thresholds import Thresholds

    cert = {"filename": "pveproxy-ssl.pem", "notafter": 0, "subject": "/CN=pve1"}
    expiring = _certificate_finding("pve1", cert, 12, 30, Thresholds())
    expired = _certificate_finding("pve1", cert, -3, 14, Thresholds())
    assert expiring is not None and expired is not None
    assert expiring.message.endswith("PVE renews it 30 days before expiry, so pve-daily-update failed to renew it")
    assert expired.message.endswith("so pve-daily-update failed to renew it")


def test_fix_texts_name_only_operations_that_exist_as_the_client_calls_them() -> None:
    """A fix names an operation bare, so the answer names it as this client calls it (surface/naming.py)."""
    import pve_steward.analysis.health  # noqa: F401  (registers every check's codes)
    from pve_steward.analysis.codes import CODES
    from pve_steward.surface.naming import Naming
    from pve_steward.surface.registry import load_registry

    registry = load_registry()
    ops = set(registry.operations)
    verbs = tuple({op.split("_")[0] + "_" for op in ops})
    named: set[str] = set()
    for info in CODES.values():
        for word in re.findall(r"`?\b[a-z]+(?:_[a-z0-9]+)+\b`?", info.remediation):
            bare = word.strip("`")
            if bare in ops:
                assert word == bare, f"{info.code}: `{bare}` in backticks is never renamed for meta-tool clients"
                named.add(bare)
            else:
                assert not (bare.startswith(verbs) and bare.endswith(("_move", "_migration", "_evacuation"))), (
                    f"{info.code} names an operation that does not exist: {bare}"
                )
    assert "check_guest_migration" in named and "plan_node_evacuation" in named
    meta = Naming.build(registry, list(registry.operations.values()), granular=False, tier="admin", read_only=False)
    fix = CODES["NODE_CPU_HIGH"].remediation
    assert "(planning with action=check_guest_migration)" in meta.text(fix)


def test_one_tool_is_one_tool(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "--toolsets", "cluster"]) == 0
    assert capsys.readouterr().err.strip() == "1 tool"
    assert main(["tools"]) == 0
    assert re.fullmatch(r"\d+ tools", capsys.readouterr().err.strip())


# --- help texts


def help_of(capsys: pytest.CaptureFixture[str], argv: list[str], entry: Any = None) -> str:
    from pve_steward.cli import build_parser

    with pytest.raises(SystemExit):
        (entry or build_parser().parse_args)([*argv, "--help"])
    return capsys.readouterr().out


def test_check_help_lists_what_check_reads_and_no_server_only_flag(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(capsys, ["check"])
    for flag in ("--heavy-calls", "--busy-wait", "--read-cache-ttl", "--diagnostics-process", "--otel-endpoint"):
        assert flag not in text, f"check --help lists {flag}, which only a running server reads"
    for flag in ("--url", "--pbs-url", "--timeout", "--thresholds", "--suppress", "--html", "--areas"):
        assert flag in text
    serve = help_of(capsys, ["serve"])
    assert "--heavy-calls" in serve and "--otel-endpoint" in serve and "serving:" in serve


def test_pvesim_help_has_no_markup(capsys: pytest.CaptureFixture[str]) -> None:
    from pvesim.cli import main as pvesim_main

    for argv in ([], ["serve"], ["generate"]):
        with pytest.raises(SystemExit):
            pvesim_main([*argv, "--help"])
        text = capsys.readouterr().out
        assert "``" not in text and ":class:" not in text and "usage: pvesim" in text


# --- the phrases that are gone

GONE = {
    "`plan_guest_move`": "an operation clients cannot call",
    "grant Administrator": "Administrator for one privilege",
    '"already running" if g.running': "guest is stopped: already running",
    "the guest has no notes": "no notes listed as a risk",
    '{len(tools)} tools"': "1 tools",
    "Upgrade pve-steward, or": "upgrading us for a too-old PVE",
    'pve-daily-update failed to" if': "a message cut mid-sentence",
    "our `": "operation names clients cannot call in meta mode",
}


def test_the_old_phrases_are_gone() -> None:
    sources = [p for p in (ROOT / "src").rglob("*") if p.suffix in (".py", ".yaml") and p.is_file()]
    for phrase, what in GONE.items():
        hits = [str(p.relative_to(ROOT)) for p in sources if phrase in p.read_text(encoding="utf-8")]
        assert hits == [], f"{what} is back ({phrase!r}): {hits}"
