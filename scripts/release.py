"""The release's local steps, one script for the workflow (.github/workflows/release.yml) and the suite.

Everything a release does that needs no network beyond PyPI's build dependencies happens here, so the
suite runs it (``--dry-run``) exactly as the workflow does; the publishing itself (PyPI by trusted
publishing, the image, the MCP Registry, the GitHub release) stays in the workflow, which holds the
credentials. Subcommands:

    check       the tag names the version every file carries; CHANGELOG.md has its section; the image base
                is pinned by digest
    build       sdist and wheel (built once: every later job uses these files) and the .mcpb bundle
    server-json server.json as published: the .mcpb entry with the bundle's URL and SHA-256 added
    notes       the release notes: the version's section of CHANGELOG.md
    all         the above in order, then SHA256SUMS; with --dry-run it also lists what the workflow would
                publish, and does not require running in the tag's workflow

    python scripts/release.py all --tag v0.1.0 --out-dir dist [--dry-run]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from build_mcpb import build as build_bundle  # noqa: E402  (a script beside this one, not a package)

TAG_RE = re.compile(r"^v(?P<version>\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?)$")
PINNED_FROM = re.compile(r"^FROM\s+(?P<image>\S+)", re.MULTILINE)
DIGEST_RE = re.compile(r"^[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}$")


class ReleaseError(Exception):
    """A release step that cannot go on; the message says what and how to fix it."""


def project(root: Path = ROOT) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return data


def load_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def version_of(tag: str) -> str:
    match = TAG_RE.fullmatch(tag)
    if match is None:
        raise ReleaseError(f"tag '{tag}' is not a version tag: push vMAJOR.MINOR.PATCH, e.g. v0.1.0")
    return match["version"]


def changelog_section(version: str, root: Path = ROOT) -> str:
    """The text under ``## [version]`` in CHANGELOG.md (Keep a Changelog), without its heading."""
    text = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    heading = re.search(rf"^## \[{re.escape(version)}\][^\n]*\n", text, re.MULTILINE)
    if heading is None:
        raise ReleaseError(f"CHANGELOG.md has no section '## [{version}] - YYYY-MM-DD': add the release's notes")
    rest = text[heading.end() :]
    following = re.search(r"^## \[", rest, re.MULTILINE)
    body = rest[: following.start() if following else len(rest)].strip()
    body = re.sub(r"^\[[^\]]+\]: \S+\s*$", "", body, flags=re.MULTILINE).strip()  # link references at the end
    if not body:
        raise ReleaseError(f"CHANGELOG.md's section for {version} is empty: say what changed")
    return body


def check(tag: str, root: Path = ROOT) -> str:
    """The version the tag names, after checking that every file that carries a version says the same."""
    version = version_of(tag)
    found = {"pyproject.toml": project(root)["version"], "manifest.json": load_json(root / "manifest.json")["version"]}
    server = load_json(root / "server.json")
    found["server.json"] = server["version"]
    for package in server["packages"]:
        found[f"server.json {package['registryType']} package"] = package.get("version") or package["identifier"]
    wrong = {where: v for where, v in found.items() if v != version and not str(v).endswith(f":{version}")}
    if wrong:
        named = ", ".join(f"{where} says {v}" for where, v in sorted(wrong.items()))
        raise ReleaseError(f"tag {tag} names version {version} but {named}: set the version everywhere, then tag")
    changelog_section(version, root)
    bases = PINNED_FROM.findall((root / "Dockerfile").read_text(encoding="utf-8"))
    loose = [b for b in bases if not DIGEST_RE.fullmatch(b)]
    if not bases or loose:
        raise ReleaseError(f"the Dockerfile's base {loose or bases} is not pinned by digest (image:tag@sha256:...)")
    marker = f"mcp-name: {server['name']}"
    if marker not in (root / "README.md").read_text(encoding="utf-8"):
        raise ReleaseError(f"README.md lacks '{marker}', by which the MCP Registry verifies the PyPI package")
    return version


def run(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ReleaseError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


def uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        raise ReleaseError("uv is not installed: pip install uv (it builds the sdist and the wheel)")
    return found


def build(version: str, out_dir: Path, root: Path = ROOT) -> dict[str, Path]:
    """sdist, wheel and .mcpb into ``out_dir`` (emptied first: a stale file would be published)."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    run([uv(), "build", "--sdist", "--wheel", "--out-dir", str(out_dir), str(root)], cwd=root)
    name = project(root)["name"].replace("-", "_")
    files = {
        "sdist": out_dir / f"{name}-{version}.tar.gz",
        "wheel": out_dir / f"{name}-{version}-py3-none-any.whl",
    }
    (out_dir / ".gitignore").unlink(missing_ok=True)  # uv marks its out-dir ignored; not a release file
    built = sorted(p.name for p in out_dir.iterdir())
    if sorted(p.name for p in files.values()) != built:
        raise ReleaseError(f"uv build made {built}, not one sdist and one wheel of {version}")
    files["mcpb"] = build_bundle(out_dir, root)
    return files


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def release_url(server: dict[str, Any], tag: str, filename: str) -> str:
    return f"{server['repository']['url']}/releases/download/{tag}/{filename}"


def server_json(tag: str, bundle: Path, out: Path, root: Path = ROOT) -> dict[str, Any]:
    """server.json as the registry gets it: the .mcpb entry (URL of the release asset, its SHA-256) set."""
    server = load_json(root / "server.json")
    version = version_of(tag)
    entry = {
        "registryType": "mcpb",
        "registryBaseUrl": "https://github.com",
        "identifier": release_url(server, tag, bundle.name),
        "version": version,
        "fileSha256": sha256(bundle),
        "transport": {"type": "stdio"},
    }
    server["packages"] = [p for p in server["packages"] if p["registryType"] != "mcpb"] + [entry]
    out.write_text(json.dumps(server, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return server


def image(root: Path = ROOT) -> str:
    """The OCI image as server.json names it (ghcr.io/OWNER/NAME:VERSION)."""
    return str(next(p for p in load_json(root / "server.json")["packages"] if p["registryType"] == "oci")["identifier"])


def notes(tag: str, out: Path, root: Path = ROOT) -> str:
    version = version_of(tag)
    name = project(root)["name"]
    repo = load_json(root / "server.json")["repository"]["url"].removeprefix("https://github.com/")
    text = (
        changelog_section(version, root)
        + "\n\n### Install\n\n"
        + f"- `uvx {name}=={version}` or `pipx install {name}=={version}` (PyPI)\n"
        + f"- `docker pull {image(root)}`\n"
        + f"- `{name}-{version}.mcpb` below: open it with Claude Desktop\n"
        + "\nEvery file's SHA-256 is in SHA256SUMS; each file and the image carry a build provenance attestation "
        + f"(`gh attestation verify <file> --repo {repo}`).\n"
    )
    out.write_text(text, encoding="utf-8")
    return text


def sums(out_dir: Path) -> Path:
    target = out_dir / "SHA256SUMS"
    files = sorted(p for p in out_dir.iterdir() if p.is_file() and p.name != target.name)
    target.write_text("".join(f"{sha256(p)}  {p.name}\n" for p in files), encoding="utf-8")
    return target


def publish_plan(tag: str, files: dict[str, Path]) -> list[str]:
    """What the workflow does next with these files; printed by a dry run, run by the workflow only."""
    return [
        f"test: make test EDITABLE= PACKAGE={files['wheel'].name} (the suite against the built wheel)",
        "pypi: uv publish --trusted-publishing always --check-url https://pypi.org/simple/ "
        f"{files['sdist'].name} {files['wheel'].name}",
        f"image: docker buildx build --build-arg WHEEL={files['wheel'].name} --sbom=true --provenance=mode=max "
        f"--push -t {image()}",
        f"github: gh release create {tag} --notes-file release-notes.md (dists, {files['mcpb'].name}, server.json)",
        "registry: mcp-publisher login github-oidc && mcp-publisher publish server.json",
    ]


def in_tag_workflow(tag: str) -> None:
    """Outside a dry run, the tag must be the one the workflow runs for (GitHub sets GITHUB_REF_NAME)."""
    ref = os.environ.get("GITHUB_REF_NAME")
    if ref != tag:
        raise ReleaseError(
            f"this is the release of tag {tag} but the workflow runs for {ref or 'no tag'}: "
            "run it from the tag's workflow, or add --dry-run to try the steps locally"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="release.py", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("step", choices=["check", "build", "server-json", "notes", "all"])
    parser.add_argument("--tag", required=True, help="the version tag, e.g. v0.1.0")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "dist", help="where the files go (default dist/)")
    parser.add_argument("--dry-run", action="store_true", help="run the local steps anywhere; publish nothing")
    args = parser.parse_args(argv)
    out: Path = args.out_dir
    try:
        if not args.dry_run:
            in_tag_workflow(args.tag)
        version = check(args.tag)
        if args.step == "check":
            print(f"release {args.tag}: version {version} everywhere, changelog and pinned base in place")
        elif args.step == "notes":
            out.mkdir(parents=True, exist_ok=True)
            notes(args.tag, out / "release-notes.md")
        elif args.step == "server-json":
            (bundle,) = out.glob("*.mcpb")
            server_json(args.tag, bundle, out / "server.json")
        else:
            files = build(version, out)
            if args.step == "all":
                server_json(args.tag, files["mcpb"], out / "server.json")
                notes(args.tag, out / "release-notes.md")
                sums(out)
                if args.dry_run:
                    print("dry run: the workflow would now", *publish_plan(args.tag, files), sep="\n  ")
            for path in sorted(out.iterdir()):
                print(f"{path}  sha256 {sha256(path)}")
    except ReleaseError as exc:
        print(f"release.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
