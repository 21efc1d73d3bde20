"""pvesim's answer bodies: orjson writes what the standard encoder writes, and what orjson refuses still answers."""

from __future__ import annotations

import json

import pytest
from starlette.responses import JSONResponse

import pvesim
from pvesim import jsonbody
from pvesim.api import render
from pvesim.jsonbody import DataResponse


def _stdlib(content: object) -> bytes:
    return bytes(JSONResponse(content).body)


def test_resource_rows_encode_to_the_same_bytes() -> None:
    assert jsonbody._orjson is not None, "the dev extra installs orjson: without it this test compares nothing"
    cluster = pvesim.build_cluster(pvesim.load_scenario("demo"))
    rows = [render.node_resource(cluster, n, cluster.mem_used_by_node()) for n in cluster.nodes.values()]
    rows += [render.guest_resource(cluster, g) for g in cluster.guests.values()]
    rows += [render.storage_resource(cluster, s, n) for s in cluster.storages.values() for n in cluster.nodes]
    content = {"data": [*rows, {"comment": 'naïve ✓ "quoted" \n line', "big": 2**63 - 1, "configs": {1: "x"}}]}
    assert DataResponse(content).body == _stdlib(content)


def test_floats_may_be_written_differently_but_read_the_same() -> None:
    content = {"data": {"tiny": 1e-05, "huge": -1.5e300, "cpu": 0.0523}}  # orjson writes 1e-5, Python 1e-05
    assert json.loads(DataResponse(content).body) == json.loads(_stdlib(content)) == content


def test_what_orjson_refuses_falls_back_to_the_standard_encoder() -> None:
    content = {"data": {"huge": 2**70}}  # past 64 bits: orjson raises, Python's json writes it
    assert DataResponse(content).body == _stdlib(content)


def test_values_json_has_no_form_for_still_fail_loudly() -> None:
    with pytest.raises(TypeError):
        DataResponse({"data": object()})
