"""PVE's answers decoded by orjson give what the standard library (and proxmoxer's own path) gives."""

from __future__ import annotations

import json
import math

import pytest
import requests
from proxmoxer.backends.https import JsonSerializer

from pve_steward.pveio import pvejson
from pve_steward.pveio.client import _serializer

# what PVE sends, and what orjson refuses (the standard library decides those)
BODIES = [
    b'{"data":{"memory":"2048","net0":"virtio=BC:24:11:00:00:01,bridge=vmbr0","cores":2}}',
    b'{"data":[{"vmid":100,"maxdisk":34359738368,"cpu":0.0123,"tags":"a;b"},{"vmid":101,"uptime":0}]}',
    '{"data":{"description":"caf\u00e9 \u2603 \\u00e9 \\n"}}'.encode(),
    b'{"data":{"big":18446744073709551615,"neg":-9223372036854775808,"zero":-0.0}}',
    b'{"data":{"a":1,"a":2}}',  # a repeated key: the last one, as Perl's encoder never writes but json keeps
    b'{"data":null}',
    b'{"data":[NaN,Infinity,-Infinity]}',  # refused by orjson
    b'{"data":"\\ud800 lone surrogate"}',  # refused by orjson
    b'{"data":[1e400]}',  # refused by orjson: out of float range
    b'\xef\xbb\xbf{"data":1}',  # a byte-order mark: refused by orjson
]


def _same(a: object, b: object) -> bool:
    """Equal, with NaN equal to NaN (the standard library decodes NaN; NaN != NaN)."""
    return json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr) and type(
        a
    ) is type(b)


@pytest.mark.parametrize("body", BODIES)
def test_pvejson_decodes_as_the_standard_library(body: bytes) -> None:
    assert _same(pvejson.loads(body), json.loads(body))
    assert _same(pvejson.loads(body.decode("utf-8-sig")), json.loads(body.decode("utf-8-sig")))


def _response(body: bytes) -> requests.Response:
    r = requests.Response()
    r._content = body
    r.status_code = 200
    r.encoding = "utf-8"
    return r


@pytest.mark.parametrize("body", [*BODIES, b"<html>502 Bad Gateway</html>", b'{"data":"\xff\xfe not utf-8"}'])
def test_the_clients_serializer_answers_as_proxmoxers(body: bytes) -> None:
    """Every body, the ones orjson refuses and ones that are no JSON at all, gives proxmoxer's answer."""
    ours, theirs = _serializer(), JsonSerializer()
    assert type(ours).__name__ == "FastJson"  # orjson is installed here: the fast path is what is tested
    assert _same(ours.loads(_response(body)), theirs.loads(_response(body)))


def test_answers_without_data_fail_as_proxmoxers_do() -> None:
    for body in (b'{"errors":{"vmid":"invalid"}}', b"[1,2]"):
        with pytest.raises((KeyError, TypeError)) as ours:
            _serializer().loads(_response(body))
        with pytest.raises((KeyError, TypeError)) as theirs:
            JsonSerializer().loads(_response(body))
        assert type(ours.value) is type(theirs.value)


def test_nan_is_decoded_not_refused() -> None:
    value = _serializer().loads(_response(b'{"data":[NaN]}'))
    assert math.isnan(value[0])


def test_dict_keys_are_one_object_across_answers() -> None:
    """Why orjson: its key cache gives 10,000 configs one "memory" string, not 10,000 of them."""
    first, second = (pvejson.loads(b'{"memory":"%d"}' % n) for n in (1024, 2048))
    assert next(iter(first)) is next(iter(second))


def test_large_answers_stay_with_the_standard_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson's parser holds the whole document before building objects: a large answer's peak is the
    standard library's lower one (pvejson.FAST_MAX)."""
    import orjson

    from pve_steward.pveio import client

    given: list[int] = []

    def spy(body: bytes | str) -> object:
        given.append(len(body))
        return orjson.loads(body)

    monkeypatch.setattr(pvejson, "FAST", spy)
    monkeypatch.setattr(client, "FAST_JSON", spy)
    small = b'{"data":[1,2,3]}'
    large = b'{"data":[' + b",".join([b"12345"] * (pvejson.FAST_MAX // 6 + 1)) + b"]}"
    assert len(large) > pvejson.FAST_MAX
    for body in (small, large):
        assert pvejson.loads(body) == json.loads(body)
        assert _serializer().loads(_response(body)) == json.loads(body)["data"]
    assert given == [len(small), len(small)]
