"""The Helm chart (deploy/helm/pve-steward), rendered by the real helm binary and every manifest validated
against Kubernetes' own OpenAPI schemas (kubernetes-validate, strict: an unknown field is an error).

helm comes from scripts/interop/setup.sh (run by `make test`); the test skips, saying so, only when it is
absent. What the chart promises is read from the rendered manifests: two replicas at least, probes on
/ready and /health, secrets only by reference, egress only to the addresses given, and every
environment variable a real setting of the server.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from pve_steward.config import Settings
from tests.packaging.conftest import ROOT

CHART = ROOT / "deploy" / "helm" / "pve-steward"
K8S = "1.33"
REQUIRED = {
    "pve.url": "https://pve1.example.lan:8006",
    "pve.tokenId": "steward@pve!mcp",
    "pve.egressCIDRs": "{10.0.10.0/24}",
}


def helm_binary() -> str:
    found = shutil.which("helm") or str(ROOT / ".interop" / "tools" / "helm")
    if not Path(found).exists():
        pytest.skip("helm is not installed: run scripts/interop/setup.sh (make test does)")
    return found


def render(extra: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    values = {**REQUIRED, **(extra or {})}
    args = [helm_binary(), "template", "steward", str(CHART)]
    for key, value in values.items():
        args += ["--set", f"{key}={value}"]
    return subprocess.run(args, capture_output=True, text=True, check=check, timeout=60)


def manifests(extra: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(render(extra).stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def steward(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "steward-pve-steward")


def test_every_manifest_is_valid_kubernetes() -> None:
    docs = manifests(
        {
            "pve.fingerprint": ":".join(["AB"] * 32),
            "audit.egressCIDRs": "{192.0.2.10/32}",
            "pbs.url": "pbs.example.lan:8007",
            "pbs.tokenId": "steward@pbs!monitor",
            "pbs.egressCIDRs": "{10.0.20.5/32}",
        }
    )
    assert {d["kind"] for d in docs} >= {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
    }
    for doc in docs:
        kubernetes_validate.validate(doc, K8S, strict=True)


def test_the_validator_is_strict() -> None:
    """A misspelt field fails validation, so a passing chart is a checked one."""
    deployment = steward(manifests())
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/ready"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S, strict=True)


def test_replicas_probes_and_security() -> None:
    docs = manifests()
    pod = steward(docs)["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert by_kind(docs, "HorizontalPodAutoscaler")[0]["spec"]["minReplicas"] >= 2
    assert by_kind(docs, "PodDisruptionBudget")[0]["spec"]["minAvailable"] == 1
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    fixed = manifests({"autoscaling.enabled": "false", "replicaCount": "3"})
    assert steward(fixed)["spec"]["replicas"] == 3 and not by_kind(fixed, "HorizontalPodAutoscaler")


def test_env_names_real_settings_and_secrets_are_references() -> None:
    """Every PVE_STEWARD_* variable the chart sets is a setting; no secret value is in the manifests."""
    docs = manifests(
        {
            "audit.syslog": "tls://siem.example:6514",
            "audit.required": "true",
            "pve.caSecret": "pve-ca",
            "pbs.url": "pbs.example.lan:8007",
            "pbs.tokenId": "steward@pbs!monitor",
            "pbs.fingerprint": ":".join(["CD"] * 32),
        }
    )
    env = steward(docs)["spec"]["template"]["spec"]["containers"][0]["env"]
    names = {e["name"].removeprefix("PVE_STEWARD_").lower() for e in env}
    assert names <= set(Settings.model_fields), names - set(Settings.model_fields)
    bearer = next(e for e in env if e["name"] == "PVE_STEWARD_HTTP_BEARER_TOKEN")
    assert "value" not in bearer and bearer["valueFrom"]["secretKeyRef"]["name"] == "pve-steward-http"
    plain = {e["name"]: e.get("value") for e in env}
    assert plain["PVE_STEWARD_TOKEN_SECRET_FILE"].startswith("/run/secrets/")
    assert plain["PVE_STEWARD_TOKEN_STORE"] == "redis://steward-pve-steward-redis:6379/0"
    assert all(d["kind"] != "Secret" for d in docs)  # secrets are created outside the chart


def test_egress_goes_only_where_it_is_told() -> None:
    docs = manifests({"redis.enabled": "false", "redis.externalUrl": "redis://10.9.0.5:6379/0"})
    policy = next(d for d in by_kind(docs, "NetworkPolicy") if d["metadata"]["name"] == "steward-pve-steward")
    blocks = [peer["ipBlock"]["cidr"] for rule in policy["spec"]["egress"] for peer in rule["to"] if "ipBlock" in peer]
    assert blocks == ["10.0.10.0/24"]  # the PVE nodes; external Redis has no CIDR given, so no rule for it
    assert not [d for d in docs if d["metadata"]["name"].endswith("-redis")]
    dns = policy["spec"]["egress"][-1]
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}


def test_missing_or_bad_values_are_named() -> None:
    no_url = render({"pve.url": ""}, check=False)
    assert no_url.returncode != 0 and "pve.url is required" in no_url.stderr
    no_pbs_token = render({"pbs.url": "pbs.lan"}, check=False)
    assert no_pbs_token.returncode != 0 and "pbs.tokenId is required" in no_pbs_token.stderr
    no_redis = render({"redis.enabled": "false"}, check=False)
    assert no_redis.returncode != 0 and "redis.externalUrl is required" in no_redis.stderr
    bad_tier = render({"pve.tier": "root"}, check=False)
    assert bad_tier.returncode != 0 and "/pve/tier" in bad_tier.stderr


def test_service_monitor_scrapes_metrics_with_the_bearer_token() -> None:
    monitor = by_kind(manifests({"serviceMonitor.enabled": "true"}), "ServiceMonitor")[0]
    endpoint = monitor["spec"]["endpoints"][0]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenSecret"] == {"name": "pve-steward-http", "key": "bearer-token"}


def test_the_built_in_redis_keeps_used_tokens_across_its_restart() -> None:
    """Issue 42: the chart's Redis ran without persistence, so a token confirmed before a Redis restart ran again
    after it. It now keeps an append-only file, fsync'd on every write, on a persistent volume; the replicas are
    told how many they are, so a Redis without one (an external URL) refuses their start."""
    docs = manifests()
    redis = next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "steward-pve-steward-redis")
    pod = redis["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--appendonly") + 1] == "yes" and args[args.index("--appendfsync") + 1] == "always"
    claim = next(d for d in by_kind(docs, "PersistentVolumeClaim") if d["metadata"]["name"].endswith("-redis"))
    data = next(v for v in pod["volumes"] if v["name"] == "data")
    assert data["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert redis["spec"]["strategy"]["type"] == "Recreate"
    env = {e["name"]: e.get("value") for e in steward(docs)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PVE_STEWARD_REPLICAS"] == "6"  # autoscaling's maximum
    fixed = manifests({"autoscaling.enabled": "false", "replicaCount": "3", "redis.persistence.enabled": "false"})
    env = {e["name"]: e.get("value") for e in steward(fixed)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PVE_STEWARD_REPLICAS"] == "3" and not by_kind(fixed, "PersistentVolumeClaim")
    for doc in docs + fixed:
        kubernetes_validate.validate(doc, K8S, strict=True)
