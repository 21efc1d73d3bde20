"""Generated docs are current, design records are indexed, layering rules hold."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pve_steward.analysis.pverules import all_rules, render_rules
from pve_steward.surface.docs import render_all, render_checks
from pve_steward.surface.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]


def test_tools_md_is_current() -> None:
    current = (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
    assert current == render_all(load_registry()), "run `pve-steward docs` and commit docs/tools.md"


def test_rules_md_is_current() -> None:
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == render_rules(), "run `pve-steward docs` and commit docs/rules.md"


def test_checks_md_is_current() -> None:
    current = (ROOT / "docs" / "checks.md").read_text(encoding="utf-8")
    assert current == render_checks(), "run `pve-steward docs` and commit docs/checks.md"


def test_pve_rule_registration_names_the_function() -> None:
    rules = all_rules()
    assert [r.id for r in rules] == sorted(r.id for r in rules)
    for r in rules:
        assert r.pve and r.rule and r.ours.startswith("pve_steward.analysis."), r


def test_every_design_record_is_indexed() -> None:
    folder = ROOT / "docs" / "design"
    files = {p.name for p in folder.glob("*.md") if p.name != "README.md"}
    assert all(re.fullmatch(r"\d{6}-\d+-[a-z0-9-]+\.md", f) for f in files), files
    index = (folder / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\((\d{6}-\d+-[a-z0-9-]+\.md)\)", index))
    assert linked == files
    for name in files:
        text = (folder / name).read_text(encoding="utf-8")
        for section in ("## Status", "## Context", "## Decision", "## Consequences"):
            assert section in text, f"{name} lacks {section}"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_layering() -> None:
    src = ROOT / "src"
    for path in (src / "pve_steward" / "analysis").rglob("*.py"):
        bad = {
            m
            for m in _imports(path)
            if m.startswith(("pve_steward.pveio.client", "pve_steward.tools", "mcp", "proxmoxer", "requests", "pvesim"))
        }
        assert not bad, f"{path.name} imports {bad}"
    for path in (src / "pvesim").rglob("*.py"):
        assert not {m for m in _imports(path) if m.startswith("pve_steward")}, path
    for path in (src / "pve_steward").rglob("*.py"):
        if path.name != "cli.py":
            assert not {m for m in _imports(path) if m.startswith("pvesim")}, f"{path} imports pvesim"
        if path.name != "client.py":
            assert not {m for m in _imports(path) if m.startswith("proxmoxer")}, f"{path} imports proxmoxer"
