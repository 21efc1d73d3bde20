"""The release workflow, checked offline, and every release step that needs no publishing dry-run here.

The workflow files are validated against the GitHub workflow schema that check-jsonschema ships (installed
from PyPI with the dev extra; nothing is fetched), then read for what a schema cannot see: every action
pinned to a commit we know the inputs and outputs of, every expression pointing at a step or job output
that exists, no stored secret, OIDC only where something is published. ``scripts/release.py all
--dry-run`` then does what the workflow's build job does: check, build sdist, wheel and bundle once,
server.json with the bundle's SHA-256, notes from the changelog.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator

from tests.packaging.conftest import PROJECT, ROOT, VERSION, clean_env

WORKFLOWS = ROOT / ".github" / "workflows"
RELEASE = yaml.safe_load((WORKFLOWS / "release.yml").read_text(encoding="utf-8"))
CI = yaml.safe_load((WORKFLOWS / "ci.yml").read_text(encoding="utf-8"))
PINS: dict[str, dict[str, Any]] = json.loads((Path(__file__).parent / "pinned_actions.json").read_text())["actions"]
REGISTRY_SCHEMA = ROOT.parent / "shared" / "mcp-registry" / "server.schema.json"
PUBLISHING_JOBS = {"attest", "pypi", "image", "registry"}  # the only jobs that get an OIDC token
TAG = f"v{VERSION}"


def on(workflow: dict[str, Any]) -> Any:
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on:` key as True


def steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(job, step) for job, spec in workflow["jobs"].items() for step in spec.get("steps", [])]


def check_jsonschema(schema: str, *files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_workflows_are_valid_against_githubs_workflow_schema(tmp_path: Path) -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"release.yml", "ci.yml"}
    done = check_jsonschema("vendor.github-workflows", *files)
    assert done.returncode == 0, done.stdout + done.stderr
    dependabot = check_jsonschema("vendor.dependabot", ROOT / ".github" / "dependabot.yml")
    assert dependabot.returncode == 0, dependabot.stdout + dependabot.stderr
    broken = tmp_path / "broken.yml"  # the validator does check: a misspelt key fails
    broken.write_text((WORKFLOWS / "release.yml").read_text().replace("    runs-on:", "    run-on:", 1))
    assert check_jsonschema("vendor.github-workflows", broken).returncode == 1


def test_release_runs_on_version_tags_and_ci_runs_the_suite_as_ci_does() -> None:
    assert on(RELEASE) == {"push": {"tags": ["v*"]}}
    assert {"push", "pull_request"} <= set(on(CI))
    ci_runs = [s["run"] for _, s in steps(CI) if "run" in s]
    assert any(run.strip() == "bash .ci/run" for run in ci_runs), ci_runs


def test_every_action_is_pinned_to_a_known_commit_and_given_only_its_inputs() -> None:
    for workflow in (RELEASE, CI):
        for job, step in steps(workflow):
            if "uses" not in step:
                continue
            uses = step["uses"]
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", uses), f"{job}: {uses} is not pinned to a commit"
            assert uses in PINS, f"{job}: {uses} is not in pinned_actions.json (add it with its action.yml's names)"
            given = set(step.get("with", {}))
            assert given <= set(PINS[uses]["inputs"]), f"{job}: {uses} takes no {given - set(PINS[uses]['inputs'])}"
            assert set(PINS[uses]["required"]) <= given, f"{job}: {uses} needs {PINS[uses]['required']}"
    text = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    for uses, pin in PINS.items():  # the comment beside each pin names its release, for the reader
        for line in (line for line in text.splitlines() if uses in line):
            assert line.rstrip().endswith(f"# {pin['version']}"), line


def test_every_expression_names_an_output_that_exists() -> None:
    jobs = RELEASE["jobs"]
    for name, job in jobs.items():
        needs = job.get("needs", [])
        needs = [needs] if isinstance(needs, str) else needs
        assert set(needs) <= set(jobs), f"{name} needs a job that does not exist: {set(needs) - set(jobs)}"
        ids = {s["id"]: s for s in job.get("steps", []) if "id" in s}
        text = yaml.safe_dump(job)
        for other, output in re.findall(r"needs\.([\w-]+)\.outputs\.([\w-]+)", text):
            assert other in needs, f"{name} reads needs.{other} but does not need it"
            assert output in jobs[other].get("outputs", {}), f"{name}: job {other} has no output {output}"
        for step_id, output in re.findall(r"steps\.([\w-]+)\.outputs\.([\w-]+)", text):
            assert step_id in ids, f"{name}: no step with id {step_id}"
            step = ids[step_id]
            known = PINS[step["uses"]]["outputs"] if "uses" in step else re.findall(r"echo \"(\w+)=", step["run"])
            assert output in known, f"{name}: step {step_id} sets no output {output}"


def test_no_stored_secret_and_an_oidc_token_only_where_something_is_published() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in WORKFLOWS.glob("*.yml"))
    assert "secrets." not in text, "a stored secret: publish by trusted publishing / OIDC instead"
    assert RELEASE["permissions"] == {} and CI["permissions"] == {"contents": "read"}
    for name, job in RELEASE["jobs"].items():
        permissions = job.get("permissions", {})
        assert (permissions.get("id-token") == "write") == (name in PUBLISHING_JOBS), f"{name}: {permissions}"
        writes = {k for k, v in permissions.items() if v == "write"} - {"id-token", "attestations"}
        allowed = {"image": {"packages"}, "github": {"contents"}}.get(name, set())
        assert writes <= allowed, f"{name} may write {writes - allowed}"
    for _, step in steps(RELEASE):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def run_text(job: str) -> str:
    return "\n".join(str(s.get("run", "")) for s in RELEASE["jobs"][job]["steps"])


def test_each_job_does_its_part_with_the_files_built_once() -> None:
    jobs = RELEASE["jobs"]
    assert 'scripts/release.py all --tag "${GITHUB_REF_NAME}" --out-dir dist' in run_text("build")
    assert [s["with"]["name"] for s in jobs["build"]["steps"] if "upload-artifact" in s.get("uses", "")] == ["dist"]
    assert "uv build" not in "".join(run_text(j) for j in jobs if j != "build"), "only the build job builds"
    assert 'bash .ci/run EDITABLE= PACKAGE="${WHEEL}"' in run_text("test") and "site-packages" in run_text("test")
    assert jobs["pypi"]["environment"]["name"] == "pypi" and set(jobs["pypi"]["needs"]) >= {"build", "test"}
    assert "uv publish --trusted-publishing always" in run_text("pypi")
    push = next(s for s in jobs["image"]["steps"] if s.get("id") == "push")
    assert push["with"]["push"] is True and push["with"]["sbom"] is True and push["with"]["provenance"] == "mode=max"
    assert push["with"]["build-args"] == "WHEEL=${{ needs.build.outputs.wheel }}", "the image installs the wheel"
    assert "imagetools inspect" in run_text("image"), "the pinned base digest is checked before the build"
    assert "--notes-file dist/release-notes.md" in run_text("github") and "dist/*.mcpb" in run_text("github")
    assert set(jobs["github"]["needs"]) >= {"pypi", "image"} and jobs["registry"]["needs"] == ["github"]
    registry = run_text("registry")
    assert "mcp-publisher login github-oidc" in registry and "mcp-publisher publish" in registry
    assert "sha256sum -c" in registry and re.fullmatch(r"v\d+\.\d+\.\d+", RELEASE["env"]["MCP_PUBLISHER_VERSION"])


def release(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "release.py"), *args],
        env=env or clean_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("release") / "dist"
    done = release("all", "--tag", TAG, "--out-dir", str(out), "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def test_the_dry_run_builds_each_file_once_and_lists_what_would_be_published(dry_run: tuple[Path, str]) -> None:
    out, printed = dry_run
    name = PROJECT["name"]
    expected = {
        f"{name.replace('-', '_')}-{VERSION}.tar.gz",
        f"{name.replace('-', '_')}-{VERSION}-py3-none-any.whl",
        f"{name}-{VERSION}.mcpb",
        "server.json",
        "release-notes.md",
        "SHA256SUMS",
    }
    assert {p.name for p in out.iterdir()} == expected
    sums = dict(reversed(line.split("  ")) for line in (out / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == expected - {"SHA256SUMS"}
    for file, digest in sums.items():
        assert hashlib.sha256((out / file).read_bytes()).hexdigest() == digest
    for step in ("uv publish --trusted-publishing always", "--sbom=true --provenance=mode=max", "gh release create"):
        assert step in printed
    with zipfile.ZipFile(out / f"{name}-{VERSION}.mcpb") as bundle:
        assert "uv.lock" in bundle.namelist()


def test_the_released_server_json_carries_the_bundles_sha256_and_is_valid(dry_run: tuple[Path, str]) -> None:
    out, _ = dry_run
    server = json.loads((out / "server.json").read_text())
    committed = json.loads((ROOT / "server.json").read_text())
    bundle = out / f"{PROJECT['name']}-{VERSION}.mcpb"
    (mcpb,) = [p for p in server["packages"] if p["registryType"] == "mcpb"]
    assert mcpb["fileSha256"] == hashlib.sha256(bundle.read_bytes()).hexdigest()
    assert mcpb["identifier"] == f"{committed['repository']['url']}/releases/download/{TAG}/{bundle.name}"
    assert [p for p in server["packages"] if p["registryType"] != "mcpb"] == committed["packages"]
    if REGISTRY_SCHEMA.exists():
        schema = json.loads(REGISTRY_SCHEMA.read_text(encoding="utf-8"))
        validator = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)
        assert [e.message for e in validator.iter_errors(server)] == []


def test_the_release_notes_are_the_changelogs_section(dry_run: tuple[Path, str]) -> None:
    out, _ = dry_run
    notes = (out / "release-notes.md").read_text()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    section = changelog.split(f"## [{VERSION}]", 1)[1].split("\n", 1)[1].split("\n## [", 1)[0]
    body = "\n".join(line for line in section.strip().splitlines() if not line.startswith("[")).strip()
    assert notes.startswith(body) and f"uvx {PROJECT['name']}=={VERSION}" in notes


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("v9.9.9", f"tag v9.9.9 names version 9.9.9 but manifest.json says {VERSION}"),
        ("release-1", "tag 'release-1' is not a version tag: push vMAJOR.MINOR.PATCH"),
    ],
)
def test_a_tag_that_does_not_match_is_refused_in_one_sentence(tmp_path: Path, tag: str, message: str) -> None:
    done = release("check", "--tag", tag, "--dry-run")
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_outside_the_tags_workflow_only_a_dry_run_goes_ahead() -> None:
    done = release("check", "--tag", TAG, env=clean_env(GITHUB_REF_NAME="v0.0.1"))
    assert done.returncode == 1 and "the workflow runs for v0.0.1" in done.stderr and "--dry-run" in done.stderr
    assert release("check", "--tag", TAG, env=clean_env(GITHUB_REF_NAME=TAG)).returncode == 0


def test_make_demo_installs_the_runtime_only_and_make_test_the_dev_extra(tmp_path: Path) -> None:
    def planned(target: str) -> list[str]:
        done = subprocess.run(
            ["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return [line for line in done.stdout.splitlines() if "pip install" in line and "--upgrade pip" not in line]

    assert planned("demo") == [f"{tmp_path / 'venv'}/bin/python -m pip install --quiet -e '.'"]
    assert planned("test") == [f"{tmp_path / 'venv'}/bin/python -m pip install --quiet -e '.[dev]'"]
    runtime = " ".join(PROJECT["dependencies"])
    for dev_only in ("uvloop", "pytest", "mypy", "playwright", "kubernetes-validate", "pipx"):
        assert dev_only not in runtime, f"{dev_only} is a runtime dependency: make demo would install it"
