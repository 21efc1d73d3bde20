"""The container image: the Dockerfile's promises read from the file, the healthcheck run for real,
and, wherever a Docker daemon answers, the image built and asked for tools/list over stdio.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.httpserver import free_port, serving
from tests.packaging.conftest import DEMO_TOOLS, ROOT, VERSION, clean_env, demo_session

pytestmark = pytest.mark.anyio
SERVER = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
HEALTHCHECK = ROOT / "scripts" / "container_healthcheck.py"
SECRETISH = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|KEY", re.IGNORECASE)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per Dockerfile instruction: comments dropped, continuations joined."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def final_stage(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def key_values(args: str) -> dict[str, str]:
    """LABEL/ENV arguments (``k=v k2="v 2"``) as a dict."""
    return dict(part.split("=", 1) for part in shlex.split(args) if "=" in part)


STEPS = instructions((ROOT / "Dockerfile").read_text(encoding="utf-8"))
FINAL = final_stage(STEPS)


PINNED = re.compile(r"python:3\.1[1-9]-slim(-[a-z]+)?@sha256:[0-9a-f]{64}")


def test_dockerfile_is_multi_stage_on_a_slim_python_base_pinned_by_digest() -> None:
    """Every stage starts from the same slim Python image, named by tag for the reader and by digest for the
    build: a tag moves, a digest does not (the release workflow refuses a digest the registry lost)."""
    froms = [args.split()[0] for word, args in STEPS if word == "FROM"]
    assert len(froms) >= 2 and " AS " in next(a for w, a in STEPS if w == "FROM").upper()
    for base in froms:
        assert PINNED.fullmatch(base), f"FROM {base}: pin the base as python:3.X-slim-<release>@sha256:<64 hex>"
    assert len(set(froms)) == 1, f"the stages start from different images: {sorted(set(froms))}"
    assert not [args for word, args in STEPS if word == "ARG" and "IMAGE" in args], "no tag-only ARG base to override"
    assert any("--from=build" in args for word, args in FINAL if word == "COPY")


def test_final_stage_runs_as_a_non_root_user() -> None:
    users = [args for word, args in FINAL if word == "USER"]
    assert users, "no USER in the final stage: the server would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")


def test_image_carries_the_registry_label_and_a_health_check() -> None:
    labels: dict[str, str] = {}
    for word, args in FINAL:
        if word == "LABEL":
            labels.update(key_values(args))
    assert labels["io.modelcontextprotocol.server.name"] == SERVER["name"]
    (health,) = [args for word, args in FINAL if word == "HEALTHCHECK"]
    assert "container_healthcheck" in " ".join(a for w, a in STEPS if w == "COPY") and "healthcheck" in health
    entry = next(args for word, args in FINAL if word == "ENTRYPOINT")
    assert json.loads(entry) == ["pve-steward"]
    assert not [args for word, args in FINAL if word == "CMD"], "no CMD: the server's default transport (stdio)"


def test_no_secret_is_baked_into_the_image() -> None:
    for word, args in STEPS:
        if word in ("ENV", "ARG"):
            for key, value in key_values(args).items():
                assert not (SECRETISH.search(key) and value), f"{word} {key} bakes a secret into the image"
    assert "*" in (ROOT / ".dockerignore").read_text().split(), ".dockerignore lets in only what the image needs"


def healthcheck_module() -> Any:
    spec = importlib.util.spec_from_file_location("container_healthcheck", HEALTHCHECK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "env", "toml", "target"),
    [
        ([], {}, None, None),
        (["demo", "--stdio"], {}, None, None),
        (["demo"], {}, None, ("127.0.0.1", 8765)),
        (["--transport", "http", "--http-port", "9000"], {}, None, ("127.0.0.1", 9000)),
        (["--transport=http"], {"PVE_STEWARD_HTTP_PORT": "9100"}, None, ("127.0.0.1", 9100)),
        ([], {"PVE_STEWARD_TRANSPORT": "http"}, None, ("127.0.0.1", 8765)),
        (["--transport", "stdio"], {"PVE_STEWARD_TRANSPORT": "http"}, None, None),
        (["serve", "--http-host", "0.0.0.0", "--transport", "http"], {}, None, ("127.0.0.1", 8765)),
        # the settings file: --config or PVE_STEWARD_CONFIG, below the environment and the flags
        (["--config", "{toml}"], {}, 'transport = "http"\nhttp_port = 9200\n', ("127.0.0.1", 9200)),
        ([], {"PVE_STEWARD_CONFIG": "{toml}"}, 'transport = "http"\nhttp_port = 9200\n', ("127.0.0.1", 9200)),
        (
            [],
            {"PVE_STEWARD_CONFIG": "{toml}", "PVE_STEWARD_HTTP_PORT": "9300"},
            'transport = "http"\n',
            ("127.0.0.1", 9300),
        ),
        (["--transport", "stdio", "--config", "{toml}"], {}, 'transport = "http"\n', None),
        # PID 1's command line as the kernel gives it: the interpreter, the script, then the arguments
        (["/opt/pve-steward/bin/python", "/opt/pve-steward/bin/pve-steward", "demo"], {}, None, ("127.0.0.1", 8765)),
        (["check", "--areas", "ceph"], {}, None, None),
    ],
)
def test_healthcheck_reads_the_servers_settings_as_the_server_does(
    argv: list[str],
    env: dict[str, str],
    toml: str | None,
    target: tuple[str, int] | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = tmp_path / "steward.toml"
    if toml is not None:
        config.write_text(toml, encoding="utf-8")
    for key in [k for k in os.environ if k.startswith("PVE_STEWARD_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value.replace("{toml}", str(config)))
    argv = [a.replace("{toml}", str(config)) for a in argv]
    assert healthcheck_module().probe_target(argv) == target


def healthcheck(*server_args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK), *server_args],
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_healthcheck_passes_on_a_serving_demo_and_fails_on_a_dead_port(tmp_path: Path) -> None:
    port = free_port()
    demo = [sys.executable, "-m", "pve_steward", "demo", "--http-port", str(port), "--state-dir", str(tmp_path)]
    with serving(demo, port, cwd=ROOT):
        alive = healthcheck("demo", "--http-port", str(port))
    assert alive.returncode == 0 and '"ok"' in alive.stdout.replace("'", '"'), alive.stdout + alive.stderr
    dead = healthcheck("demo", "--http-port", str(port))  # the server has stopped
    assert dead.returncode == 1 and f"127.0.0.1:{port}/health" in dead.stdout
    assert healthcheck("demo", "--stdio").returncode == 0


def test_healthcheck_of_a_server_whose_settings_are_invalid_is_one_line() -> None:
    """The server refused to start with these settings; the probe says why instead of a traceback."""
    done = healthcheck("serve", PVE_STEWARD_TRANSPORT="http", PVE_STEWARD_HTTP_PROT="9000")
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert done.stdout.strip().splitlines() == [
        "unhealthy: unknown environment variable PVE_STEWARD_HTTP_PROT (did you mean PVE_STEWARD_HTTP_PORT?): "
        "PVE_STEWARD_* variables are the settings' names in capitals (see pve-steward serve --help); correct the "
        "name or unset it"
    ]


def docker_daemon() -> str | None:
    """Why the image cannot be built here, or None when a Docker daemon answers."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"the docker client is installed but no Docker daemon answers (docker info: {last})"
    return None


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    reason = docker_daemon()
    if reason:
        pytest.skip(f"cannot build the container image: {reason}")
    tag = f"pve-steward-test:{uuid.uuid4().hex[:12]}"
    subprocess.run(["docker", "build", "-t", tag, str(ROOT)], check=True, capture_output=True, timeout=900)
    yield tag
    subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True, timeout=120, check=False)


async def test_image_answers_tools_list_over_stdio(image: str, tmp_path: Path) -> None:
    inspect = subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=True, timeout=60)
    inspected = json.loads(inspect.stdout)
    config = inspected[0]["Config"]
    assert config["User"] not in ("", "root", "0", "0:0")
    assert config["Labels"]["io.modelcontextprotocol.server.name"] == SERVER["name"]
    session = await demo_session("docker", ["run", "-i", "--rm", image, "demo", "--stdio"], clean_env(), cwd=tmp_path)
    assert session.tools >= DEMO_TOOLS
    assert (session.server, session.version, session.cluster_name) == ("pve-steward", VERSION, "demo")


def test_image_health_check_passes_over_http(image: str) -> None:
    name = f"pve-steward-test-{uuid.uuid4().hex[:8]}"
    token = uuid.uuid4().hex
    run_args = ["docker", "run", "-d", "--rm", "--name", name, image, "demo", "--http-host", "0.0.0.0"]
    subprocess.run([*run_args, "--http-bearer-token", token], check=True, capture_output=True, timeout=120)
    try:
        for _ in range(60):
            probe = subprocess.run(
                ["docker", "exec", name, "python", "/usr/local/lib/pve-steward-healthcheck.py"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
            if probe.returncode == 0:
                break
            time.sleep(1)
        assert probe.returncode == 0, probe.stdout + probe.stderr
        assert "/health" in probe.stdout and token not in probe.stdout
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60, check=False)
