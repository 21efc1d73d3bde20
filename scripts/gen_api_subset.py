#!/usr/bin/env python3
"""Generate ``src/pvesim/data/api-subset.json`` from Proxmox's published API schema.

For each PVE release we simulate, keep every GET (pvesim answers each one as PVE does, design record
261206-63) and the other methods pvesim serves (its route table), with descriptions stripped;
everything else (types, enums, ranges, formats, permissions, returns) is copied unchanged. Run after
adding a route:

    python scripts/gen_api_subset.py --source ../shared/pve-api
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pvesim.api import ROUTES  # noqa: E402

SOURCES = {"8.4": "apidoc-8.4.json", "9.1": "apidoc-9.1.json"}
STRIP = {"description", "verbose_description", "format_description", "typetext", "completion", "links"}
OUT = ROOT / "src" / "pvesim" / "data" / "api-subset.json"


def strip(obj: Any) -> Any:
    """Drop prose from a schema node; names inside ``properties`` are data, never stripped."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "properties" and isinstance(v, dict):
                out[k] = {name: strip(prop) for name, prop in v.items()}
            elif k not in STRIP:
                out[k] = strip(v)
        return out
    if isinstance(obj, list):
        return [strip(v) for v in obj]
    return obj


def flatten(tree: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any]) -> None:
        if "info" in node:
            out[node["path"]] = node["info"]
        for child in node.get("children", []):
            walk(child)

    for top in tree:
        walk(top)
    return out


def all_paths(tree: list[dict[str, Any]]) -> set[str]:
    """Every node's path, the pure directories without methods included."""
    out: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        out.add(node["path"])
        for child in node.get("children", []):
            walk(child)

    for top in tree:
        walk(top)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "pve-api")
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed file is out of date")
    args = ap.parse_args()
    versions: dict[str, dict[str, Any]] = {}
    paths_of: dict[str, list[str]] = {}
    for release, filename in SOURCES.items():
        tree = json.loads((args.source / filename).read_text(encoding="utf-8"))
        paths = flatten(tree)
        paths_of[release] = sorted(all_paths(tree))
        subset = {}
        wanted = set(ROUTES) | {("GET", template) for template, info in paths.items() if "GET" in info}
        for method, template in sorted(wanted, key=lambda k: (k[1], k[0])):
            info = paths.get(template, {}).get(method)
            if info is not None:
                subset[f"{method} {template}"] = strip(info)
        versions[release] = subset
    data = {
        "_source": {
            release: f"proxmox/pve-docs api-viewer/apidata.js ({name}); see ATTRIBUTION.md"
            for release, name in SOURCES.items()
        },
        "versions": versions,
        # every path of the release, whatever its methods: directory indexes list the children that exist
        "paths": paths_of,
    }
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date; run scripts/gen_api_subset.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    missing = {r: sorted(f"{m} {p}" for m, p in ROUTES if f"{m} {p}" not in v) for r, v in versions.items()}
    print(f"wrote {OUT} ({len(text)} bytes); not in schema: {missing}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
