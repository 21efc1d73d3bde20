"""Syslog forwarding settings and framing: clear errors for bad values, RFC 5424 + RFC 6587 octet counting."""

from __future__ import annotations

import json

import pytest

from pve_steward.config import ConfigError, load_settings
from pve_steward.security.syslog import SyslogTarget, SyslogTargetError, frame


def test_targets_are_tcp_or_tls_with_a_port() -> None:
    assert SyslogTarget.parse("tls://siem.example:6514") == SyslogTarget("tls", "siem.example", 6514)
    assert str(SyslogTarget.parse("tcp://10.0.0.5:514")) == "tcp://10.0.0.5:514"
    for bad in ("udp://h:514", "tcp://h", "h:514", "tcp://h:99999", "tcp://h:514/x"):
        with pytest.raises(SyslogTargetError, match="tcp://host:port or tls://host:port"):
            SyslogTarget.parse(bad)


def test_settings_name_the_bad_syslog_value_and_the_missing_receiver() -> None:
    with pytest.raises((ConfigError, ValueError), match="audit_syslog must be tcp://host:port"):
        load_settings(audit_syslog="udp://h:514")
    with pytest.raises((ConfigError, ValueError), match="audit_required needs audit_syslog"):
        load_settings(audit_required=True)


def test_a_frame_is_octet_counted_rfc5424_with_the_record_as_message() -> None:
    line = json.dumps({"seq": 7, "hash": "ab" * 32, "time": "2026-12-03T08:00:00Z", "x": "é\n"}).encode() + b"\n"
    framed = frame(line, "host1", 42, "0123456789abcdef")
    length, _, message = framed.partition(b" ")
    assert int(length) == len(message)
    sd = f'[pve-steward@32473 seq="7" hash="{"ab" * 32}" log="0123456789abcdef"]'
    head = f"<109>1 2026-12-03T08:00:00Z host1 pve-steward 42 audit {sd} "
    assert message.startswith(head.encode() + b"\xef\xbb\xbf")
    assert json.loads(message.split(b"\xef\xbb\xbf", 1)[1]) == json.loads(line)
