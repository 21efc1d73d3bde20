"""Guest tags as PVE stores and guards them (analysis/guesttags.py), on /cluster/options answers:
pve-guest-common GuestHelpers.pm get_unique_tags and assert_tag_permissions."""

from __future__ import annotations

from pve_steward.analysis.guesttags import stored_tags, tag_refusal


def test_tags_are_stored_lower_case_sorted_and_once_unless_tag_style_says_otherwise() -> None:
    assert stored_tags(["Web", "prod", "PROD"], {}) == ["prod", "web"]
    assert stored_tags(["Web", "prod", "PROD"], {"tag-style": {"case-sensitive": 1}}) == ["PROD", "Web", "prod"]
    assert stored_tags(["web", "Prod"], {"tag-style": {"ordering": "config"}}) == ["web", "prod"]
    assert stored_tags(["web", "Prod"], {"tag-style": "case-sensitive=1,ordering=config"}) == ["web", "Prod"]


def test_a_token_without_sys_modify_changes_only_the_tags_it_may() -> None:
    """A registered tag never; under user-tag-access 'list' only listed ones; 'free' (the default) anything else.
    Removing a tag is a change as adding one is."""
    free = {"allowed-tags": ["mail"], "registered-tags": ["prod"]}
    assert tag_refusal(["mail"], ["mail", "db"], free, audit=True) == (None, [])
    assert tag_refusal(["mail", "prod"], ["mail"], free, audit=True)[0] == (
        "changing tag 'prod' needs Sys.Modify on / (datacenter.cfg registered-tags, user-tag-access)"
    )
    listed = {"allowed-tags": ["web"], "user-tag-access": {"user-allow": "list", "user-allow-list": ["web"]}}
    assert tag_refusal([], ["web"], listed, audit=True) == (None, [])
    assert tag_refusal([], ["db"], listed, audit=True)[0] is not None
    # without Sys.Audit on / only allowed-tags is known: a tag outside it is not provable, not refused
    assert tag_refusal([], ["db", "web"], {"allowed-tags": ["web"]}, audit=False) == (None, ["db"])
