"""`check`'s output levels (PASS per clean area, NOTICE, SKIP apart) in text, JSON and markdown, and cluster
text that cannot drive the terminal (issue 44 item 6, issue 46 item 4; design record 261206-62)."""

from __future__ import annotations

import io
import json
import re

from pve_steward.analysis.codes import CODES
from pve_steward.analysis.findings import Finding, Report, Subject, finding, make_report
from pve_steward.serving.checkcmd import (
    FACTS,
    Header,
    json_body,
    level,
    outline,
    print_report,
    render,
    subject_words,
    terminal_safe,
)
from pve_steward.views.report import markdown
from tests.untrusted import plain

ESC = "\x1b[2J\x1b[31mPASS: all fine\x1b[0m"  # clears the screen and forges a PASS line
CSI = "\x9b31m"  # the one-byte CSI some terminals take
HEADER = Header("lab (3 nodes)", "9.1.2", "ops@pve!mcp", 1_796_000_000)


def guest(vmid: int, name: str = "web") -> Subject:
    return Subject(kind="guest", id=str(vmid), name=name, node="pve1")


def skipped(affects: list[str]) -> Finding:
    return finding(
        "CHECK_SKIPPED",
        Subject(kind="data", id="/access/users"),
        "skipped user checks: no Sys.Audit on /access",
        {"path": "/access/users", "status": 403, "error": "denied", "affects": affects},
    )


def unread(affects: list[str]) -> Finding:
    return finding(
        "DATA_INCOMPLETE",
        Subject(kind="data", id="/nodes/pve3/storage", node="pve3"),
        "could not read storage on pve3: timeout",
        {"path": "/nodes/pve3/storage", "status": None, "error": "timeout", "affects": affects},
    )


def report(findings: list[Finding], checked: list[str]) -> Report:
    return make_report("health", findings, checked, limit=None)


def test_each_finding_gets_the_level_pve8to9_would_print() -> None:
    assert level(finding("BACKUP_NONE", guest(104), "no backup")) == "FAIL"
    assert level(finding("BACKUP_STALE", guest(104), "old")) == "WARN"
    assert level(finding("GUEST_NO_ONBOOT", guest(104), "no onboot")) == "NOTICE"  # info: worth a look
    assert level(finding("CLUSTER_STANDALONE", Subject(kind="cluster", id="cluster"), "single")) == "INFO"  # a fact
    assert level(skipped(["access"])) == "SKIP"  # info severity, never counted as info


def test_facts_are_info_codes_whose_fix_says_nothing_to_do() -> None:
    for code in FACTS:
        assert CODES[code].severity == "info", code
        assert CODES[code].remediation.startswith("Nothing to"), code


def test_a_clean_area_passes_and_a_skipped_one_does_not() -> None:
    r = report(
        [finding("BACKUP_STALE", guest(104), "newest backup of 104 is old"), skipped(["access"])],
        ["backups", "ha", "access"],
    )
    text = render(r, color=False, header=HEADER)
    ha = text.split("= HIGH AVAILABILITY =")[1].split("= ")[0]
    assert "PASS: no warnings or failures in high availability" in ha
    backups = text.split("= BACKUPS =")[1].split("= ")[0]
    assert "PASS" not in backups and "WARN: [BACKUP_STALE]" in backups
    access = text.split("= ACCESS =")[1].split("= ")[0]
    assert "PASS" not in access and "SKIP: [CHECK_SKIPPED] skipped user checks" in access  # said where it limits
    data = text.split("= DATA =")[1].split("= ")[0]
    assert "PASS: every read the checks needed succeeded" in data and "CHECK_SKIPPED" not in data
    summary = text.split("= SUMMARY =")[1]
    for label, n in (("PASS", 2), ("NOTICE", 0), ("SKIP", 1), ("WARN", 1), ("FAIL", 0), ("INFO", 0)):
        assert re.search(rf"^{label}:\s+{n}$", summary, re.MULTILINE), (label, summary)
    assert [(s.area, s.result) for s in outline(r)] == [
        ("data", "PASS"),
        ("ha", "PASS"),
        ("backups", "WARN"),
        ("access", "SKIP"),
    ]


def test_an_area_a_failed_read_left_unchecked_is_no_clean_bill() -> None:
    r = report([unread(["capacity"])], ["capacity", "ha"])
    text = render(r, color=False)
    capacity = text.split("= CAPACITY =")[1].split("= ")[0]
    assert "PASS" not in capacity and "not a clean bill: could not read storage on pve3" in capacity
    assert "PASS: no warnings or failures in high availability" in text
    assert "WARN: [DATA_INCOMPLETE]" in text.split("= DATA =")[1]
    assert {s.area: s.result for s in outline(r)}["capacity"] == "WARN"


def test_notices_and_infos_are_counted_apart_and_keep_their_severity() -> None:
    r = report(
        [
            finding("GUEST_NO_ONBOOT", guest(108), "108 will not start after a reboot"),
            finding("CLUSTER_STANDALONE", Subject(kind="cluster", id="cluster"), "single node"),
        ],
        ["guests", "cluster"],
    )
    text = render(r, color=False)
    assert "NOTICE: [GUEST_NO_ONBOOT]" in text and "INFO: [CLUSTER_STANDALONE]" in text
    assert "PASS: no warnings or failures in guests" in text  # a notice is no failure
    assert r.counts.info == 2  # the report's severities are the public contract, unchanged
    body = json_body(r, HEADER)
    assert body["counts"] == {"critical": 0, "warning": 0, "info": 2}
    assert [f["level"] for f in body["findings"]] == ["INFO", "NOTICE"]
    assert body["check"]["levels"] == {"PASS": 3, "INFO": 1, "NOTICE": 1, "SKIP": 0, "WARN": 0, "FAIL": 0}
    assert body["check"]["header"]["time"] == "2026-11-30 00:53:20 UTC"


def test_json_keeps_skips_apart_from_info() -> None:
    r = report([skipped(["access"]), finding("GUEST_NO_ONBOOT", guest(108), "no onboot")], ["access", "guests"])
    out = io.StringIO()
    assert print_report(r, True, "never", HEADER, out=out) == 0
    body = json.loads(out.getvalue())
    levels = {f["code"]: f["level"] for f in body["findings"]}
    assert levels == {"CHECK_SKIPPED": "SKIP", "GUEST_NO_ONBOOT": "NOTICE"}
    areas = {a["area"]: a for a in body["check"]["areas"]}
    assert areas["access"]["result"] == "SKIP" and areas["access"]["levels"] == {"SKIP": 1}
    assert areas["guests"]["result"] == "NOTICE"
    assert body["check"]["levels"]["SKIP"] == 1 and body["check"]["levels"]["NOTICE"] == 1


def test_markdown_has_the_same_levels_and_keeps_skips_apart() -> None:
    r = report(
        [finding("BACKUP_NONE", guest(114), "guest 114 has no backup"), skipped(["access"])],
        ["backups", "access", "ha"],
    )
    lines = markdown(r, HEADER).splitlines()
    assert lines[0] == "## pve-steward check: CRITICAL"
    assert "| area | result | FAIL | WARN | NOTICE | INFO | SKIP |" in lines
    assert "| high availability | PASS | 0 | 0 | 0 | 0 | 0 |" in lines
    assert "| access | SKIP | 0 | 0 | 0 | 0 | 1 |" in lines
    assert any(x.startswith("| SKIP | `CHECK_SKIPPED` |") for x in lines)
    assert any(x.startswith("| FAIL | `BACKUP_NONE` | guest 114 (web) pve1 |") for x in lines)
    assert "lab (3 nodes)" in lines[2] and "ops@pve\\!mcp" in lines[2]


def test_text_and_markdown_start_with_what_to_do_first() -> None:
    """The MCP answer leads with act_first; a terminal or a ticket leads with the same: the subjects with the
    worst findings, each with its codes and fixes, before the areas. Only the worst severity is led with."""
    r = report(
        [finding("BACKUP_STALE", guest(115, "db"), "old backup"), finding("BACKUP_NONE", guest(114), "no backup")],
        ["backups"],
    )
    text = render(r, color=False, header=HEADER)
    assert text.index("= WHAT TO DO FIRST =") < text.index("= BACKUPS =")
    first = text.split("= WHAT TO DO FIRST =", 1)[1].split("\n= ", 1)[0]
    assert "1. guest 114 (web) pve1: BACKUP_NONE" in first and "      fix: " in first and "115" not in first
    ticket = markdown(r, HEADER)
    assert "### What to do first" in ticket and "1. **guest 114 (web) pve1**: `BACKUP_NONE`: " in ticket
    assert ticket.index("### What to do first") < ticket.index("| area | result |")
    disk = Subject(kind="disk", id="pve3:/dev/sdb", node="pve3")
    assert subject_words(disk) == "disk pve3:/dev/sdb" and subject_words(
        Subject(kind="node", id="pve3", node="pve3")
    ) == ("node pve3")
    calm = report([finding("GUEST_NO_ONBOOT", guest(116), "no onboot")], ["guests"])  # info only: nothing first
    assert "WHAT TO DO FIRST" not in render(calm, color=False) and "What to do first" not in markdown(calm)


def test_terminal_escapes_in_cluster_text_reach_no_terminal() -> None:
    hostile = finding("BACKUP_NONE", guest(114, name=ESC + CSI), f"guest 114 ({ESC}{CSI}) has no backup")
    r = report([hostile], ["backups"])
    for out in (render(r, color=False, header=HEADER), markdown(r, HEADER)):
        assert "\x1b" not in out and "\x9b" not in out
        assert "x1b" in out and "x9b31m" in out  # shown, escaped (markdown escapes the backslash too)
        assert not any(line.startswith("PASS: all fine") for line in out.splitlines())
    colored = render(r, color=True)
    for ours in ("\x1b[1;31m", "\x1b[32m", "\x1b[0m"):  # only our own colours reach the terminal
        colored = colored.replace(ours, "")
    assert "\x1b" not in colored
    stream = io.StringIO()
    print_report(r, True, "never", out=stream)
    assert "\x1b" not in stream.getvalue() and "\x9b" not in stream.getvalue()
    assert plain(json.loads(stream.getvalue()))["findings"][0]["message"].startswith("guest 114 (\x1b[2J")


def test_terminal_safe_escapes_controls_and_bidi_but_keeps_text() -> None:
    assert terminal_safe("web-01 (Zürich) 💾") == "web-01 (Zürich) 💾"
    assert terminal_safe("a\nb\tc\x7f") == "a\\x0ab\\x09c\\x7f"
    assert terminal_safe("evil\u202eexe.txt") == "evil\\u202eexe.txt"
    assert terminal_safe(None) == ""
