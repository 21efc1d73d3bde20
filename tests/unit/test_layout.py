"""The tree shows the architecture: every module is on the developer guide's map, and no layer imports upward.

The map is the fenced block under "## Layout" in DEVELOPERS.md: a line starting with ``src/.../`` names a
folder; the indented lines below it name its modules in their first column (``a.py, b.py   what they do``).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_import_cycles import import_graph

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "DEVELOPERS.md"


def mapped_modules() -> set[str]:
    text = GUIDE.read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    folder, found = "", set()
    for line in block.splitlines():
        if line.startswith("src/"):
            folder = line.split()[0]
            continue
        first_column = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        for name in re.split(r",\s*", first_column):
            if name.endswith((".py", ".yaml")):
                found.add(folder + name)
    return found


def source_modules() -> set[str]:
    out = set()
    for package in ("pve_steward", "pvesim"):
        for path in (ROOT / "src" / package).rglob("*.py"):
            if path.name not in {"__init__.py", "__main__.py"}:
                out.add(path.relative_to(ROOT).as_posix())
    return out


def test_every_module_is_on_the_map() -> None:
    missing = sorted(source_modules() - mapped_modules())
    assert not missing, f"add these to the map in DEVELOPERS.md: {missing}"


def test_the_map_names_no_module_that_is_gone() -> None:
    stale = sorted(m for m in mapped_modules() if not (ROOT / m).exists())
    assert not stale, f"DEVELOPERS.md maps modules that do not exist: {stale}"


# What each layer may not import (its own layer and those below it are allowed).
ABOVE_PURE = ("pveio", "security", "tools", "surface", "serving", "views", "server", "cli", "config", "observe")
FORBIDDEN = {
    "pve": (*ABOVE_PURE, "analysis"),
    "analysis": ABOVE_PURE,
    "observe": ("pveio", "security", "tools", "surface", "serving", "views", "server", "cli", "analysis"),
    "pveio": ("tools", "surface", "serving", "views", "server", "cli"),
    "tools": ("surface.registry", "surface.metatools", "serving.http", "views", "server", "cli"),
    "surface": ("serving", "views", "server", "cli"),
    "views": ("cli",),
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_layer_imports_upward() -> None:
    upward = []
    for module, imported in import_graph().items():
        banned = FORBIDDEN.get(_layer(module), ())
        for target in imported:
            rest = target.removeprefix("pve_steward.")
            if any(rest == b or rest.startswith(b + ".") for b in banned):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that run upward:\n" + "\n".join(sorted(upward))


def test_the_root_package_holds_only_the_composition_root_and_shared_vocabulary() -> None:
    root = {p.name for p in (ROOT / "src" / "pve_steward").glob("*.py")}
    assert root <= {
        "__init__.py",
        "__main__.py",
        "cli.py",
        "server.py",
        "config.py",
        "errors.py",
        "models.py",
        "perobject.py",
        "testing.py",
    }, sorted(root)
