"""Build the MCP Bundle (``.mcpb``) for one-click install in Claude Desktop, without npm.

An MCPB is a zip with ``manifest.json`` at its root (spec: github.com/modelcontextprotocol/mcpb,
MANIFEST.md). Ours uses the ``uv`` server type: the bundle carries ``pyproject.toml``, ``uv.lock``
(every dependency pinned by version and hash; the manifest runs ``uv run --frozen``, so the host
installs exactly those) and the sources, and the host installs the dependencies with uv, so one
bundle serves every platform.
The zip is reproducible (sorted entries, fixed timestamps); the script prints its path and SHA-256
(the ``fileSha256`` a registry entry of type ``mcpb`` needs).

    python scripts/build_mcpb.py [--out-dir dist]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_FILES = ("manifest.json", "pyproject.toml", "uv.lock", "README.md")
PACKAGES = ("src/pve_steward", "src/pvesim")
EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold: same input, same bytes


def bundle_files(root: Path = ROOT) -> list[Path]:
    """Every file the bundle holds, relative to ``root``, sorted."""
    files = [Path(name) for name in TOP_FILES]
    for package in PACKAGES:
        for path in (root / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append(path.relative_to(root))
    return sorted(files, key=str)


def check_manifest(root: Path = ROOT) -> dict[str, object]:
    """The manifest, after checking what must agree with the package it launches."""
    manifest: dict[str, object] = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if manifest.get("version") != project["version"]:
        raise SystemExit(f"manifest.json version {manifest.get('version')} != pyproject.toml {project['version']}")
    server = manifest.get("server")
    entry = server.get("entry_point") if isinstance(server, dict) else None
    if not isinstance(entry, str) or not (root / entry).is_file():
        raise SystemExit(f"manifest.json server.entry_point {entry!r} is not a file of the package")
    return manifest


def build(out_dir: Path, root: Path = ROOT) -> Path:
    manifest = check_manifest(root)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{manifest['name']}-{manifest['version']}.mcpb"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for rel in bundle_files(root):
            info = zipfile.ZipInfo(rel.as_posix(), date_time=EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            bundle.writestr(info, (root / rel).read_bytes())
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "dist", help="where to write the .mcpb (default dist/)")
    args = parser.parse_args(argv)
    target = build(args.out_dir)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    print(f"{target}  sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
