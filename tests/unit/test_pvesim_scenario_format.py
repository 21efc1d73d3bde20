"""The scenario format: documented from the loader's own models, refused where it is not followed, ages with
combined units (issue 45 item 6, design record 261206-63)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

import pytest

import pvesim
from pvesim import access, ceph, firewall, logs, nodehealth, scenario, scenariodoc, scenarioschema, sdn
from pvesim.generator import generate
from pvesim.scenario import build_cluster, parse_age
from pvesim.scenariodoc import render

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_page_is_the_models_rendered() -> None:
    page = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    assert page == render(), "docs/scenarios.md is stale: run `.venv/bin/pvesim docs`"


def test_the_page_documents_every_section_and_key() -> None:
    page = render()
    for section in ("## Scenario", "## Node", "## Guest", "## Ceph", "## Firewall", "## ReplicationSpec"):
        assert section in page
    assert "| `last_sync_age` |" in page and "| `in` |" in page  # an alias is documented as the key


@pytest.mark.parametrize("name", pvesim.builtin_scenarios())
def test_every_built_in_scenario_follows_the_format(name: str) -> None:
    scenarioschema.check(pvesim.load_scenario(name))


@pytest.mark.parametrize("name", pvesim.builtin_scenarios())
def test_a_built_in_scenario_is_its_file_and_each_load_is_a_copy_of_its_own(name: str) -> None:
    """Built-in scenarios are parsed once per process (scenario._builtin): what a caller changes in one load
    must not reach the next, and a load is what the YAML file says."""
    text = (ROOT / "src" / "pvesim" / "scenarios" / f"{name}.yaml").read_text(encoding="utf-8")
    first = pvesim.load_scenario(name)
    assert first == scenario.safe_yaml(text)
    first.clear()
    second = pvesim.load_scenario(name)
    assert second == scenario.safe_yaml(text)
    for value in second.values():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value[0]["changed"] = True  # a nested change, as tests make to a loaded scenario
    assert pvesim.load_scenario(name) == scenario.safe_yaml(text)


def test_a_generated_cluster_follows_the_format() -> None:
    scenarioschema.check(generate(nodes=4, guests=120, seed=3))


def test_an_unknown_key_is_refused_with_its_place() -> None:
    data = {"nodes": [{"name": "n1", "cpu": 8}], "guests": [{"vmid": 100, "node": "n1", "confg": {}}]}
    with pytest.raises(ValueError) as exc:
        build_cluster(data)
    text = str(exc.value)
    assert "nodes[0].cpu: unknown key" in text and "guests[0].confg: unknown key" in text
    assert "docs/scenarios.md" in text


def test_a_value_of_the_wrong_kind_is_refused_with_its_place() -> None:
    with pytest.raises(ValueError, match=r"nodes\.0\.cpus: Input should be a valid integer"):
        build_cluster({"nodes": [{"name": "n1", "cpus": "many"}]})


def test_free_form_sections_keep_pve_keys() -> None:
    """storage.cfg options, guest configs and datacenter.cfg are PVE's own keys, not the format's."""
    data = {
        "options": {"keyboard": "de"},
        "nodes": [{"name": "n1"}],
        "storages": [{"id": "nas", "type": "nfs", "server": "10.0.0.9", "export": "/srv"}],
        "guests": [{"vmid": 100, "node": "n1", "config": {"anything-pve-knows": 1}}],
    }
    c = build_cluster(data)
    assert c.storages["nas"].options["server"] == "10.0.0.9"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("6d59m", 6 * 86400 + 59 * 60), ("1h30m", 5400), ("2w3d", 17 * 86400), ("26h", 93600), ("90", 90),
     ("1.5h", 5400), ("-5m", -300), ("3d 4h", 3 * 86400 + 4 * 3600), (42, 42)],
)  # fmt: skip
def test_ages_combine_units(text: str | int, seconds: float) -> None:
    assert parse_age(text) == seconds


@pytest.mark.parametrize("text", ["6x", "1h1h", "h", "", "1h30", "5 minutes"])
def test_a_malformed_age_is_refused_with_the_forms_allowed(text: str) -> None:
    with pytest.raises(ValueError, match="age"):
        parse_age(text)


# keys the loaders read from a spec mapping, found by walking their code: each must be declared in a model
_LOADERS = [
    scenario.build_cluster, scenario._node, scenario._storage, scenario._guest, scenario._backup,
    scenario._replication, scenario._task, scenario._token, scenario._certificate, scenario._update,
    scenario._repositories, scenario._source, scenario._disk, scenario._zfs,
    nodehealth.health_from, nodehealth._thinpool, ceph.ceph_from, sdn.sdn_from, firewall.firewall_from,
    firewall._conf, firewall.cluster_log_from, access.access_from, logs._planted, logs._fw_event,
]  # fmt: skip
# string keys in those functions that index something else than a scenario mapping: role names, a guest's
# config key, an option of a free-form SDN zone, the options' internal task_failures
_NOT_SPEC_KEYS = {"task_failures", "storage", "BackupLister", "HAOperator", "root@pam", "ipam", "parent"}


def _keys_read(fn: Any) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    keys: set[str] = set()
    for node in ast.walk(tree):
        getter = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
        if getter and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            keys.add(node.args[0].value)
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            keys.add(node.slice.value)
    return keys


def _declared() -> set[str]:
    keys: set[str] = set()
    for model in scenariodoc._models(scenarioschema.Scenario):
        keys |= {f.alias or name for name, f in model.model_fields.items()}
    return keys


def test_every_key_a_loader_reads_is_declared() -> None:
    """The models are the loader's own: a key read from a scenario mapping and declared nowhere fails here."""
    declared = _declared()
    read = set().union(*(_keys_read(fn) for fn in _LOADERS))
    # keys of PVE's own data the loaders look into (a storage.cfg entry's options, a task row, an ACL entry ...)
    pve_keys = {"path", "role", "propagate", "user", "group", "token", "rules", "options", "members", "cidr",
                "nomatch", "comment", "uid", "time", "msg", "node", "pri", "tag", "pid", "tokenid", "privsep",
                "realm", "type", "handle", "nodes", "id", "name", "state", "pending", "status", "ip_prefix",
                "ip6_prefix", "area", "protocol", "not_ok", "neighbors", "zone", "errors", "vnet", "subnet",
                "summary", "message", "count", "severity", "section", "value", "flags"}  # fmt: skip
    missing = sorted(read - declared - pve_keys - _NOT_SPEC_KEYS)
    assert not missing, f"keys the loaders read but the format does not document: {missing}"
