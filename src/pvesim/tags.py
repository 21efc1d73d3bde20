"""Guest tags as PVE stores and guards them (pve-guest-common src/PVE/GuestHelpers.pm): datacenter.cfg's
tag-style decides the stored form, its user-tag-access and registered-tags who may change which tag."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any


def split_list(text: str) -> list[str]:
    """pve-common PVE::Tools split_list: ';', ',' and spaces separate."""
    return [t for t in text.replace(";", " ").replace(",", " ").split() if t]


def visible_tags(configs: Iterable[tuple[int, dict[str, str]]], sees: Callable[[int], bool]) -> list[str]:
    """The tags of the guests (vmid, config) the user sees: get_allowed_tags's existing tags."""
    return [tag for vmid, config in configs if sees(vmid) for tag in split_list(config.get("tags", ""))]


def unique_tags(text: str, options: dict[str, Any]) -> str:
    """get_unique_tags: lower case unless tag-style case-sensitive, sorted unless ordering=config, deduplicated."""
    style = options.get("tag-style") or {}
    sensitive = bool(int(style.get("case-sensitive") or 0))
    tags = split_list(text)
    if style.get("ordering") != "config":
        tags.sort(key=(lambda t: t) if sensitive else str.lower)
    out: list[str] = []
    for given in tags:
        tag = given if sensitive else given.lower()
        if tag not in out:
            out.append(tag)
    return ";".join(out)


def allowed_tags(options: dict[str, Any], privileged: bool, guest_tags: list[str]) -> tuple[set[str], set[str], bool]:
    """get_allowed_tags: (allowed, registered, freeform); ``guest_tags`` are the tags of the guests the user sees."""
    registered = set(options.get("registered-tags") or [])
    access = options.get("user-tag-access") or {}
    allow = str(access.get("user-allow") or "free")
    allowed: set[str] = set()
    if allow != "none" or privileged:
        allowed.update(access.get("user-allow-list") or [])
    if allow in ("free", "existing") or privileged:
        allowed.update(guest_tags)
    if privileged:
        allowed |= registered
    else:
        allowed -= registered
    return allowed, registered, allow == "free"


def tag_refusal(old: str, new: str, options: dict[str, Any], privileged: bool, guest_tags: list[str]) -> str | None:
    """assert_tag_permissions: every tag whose count changes must be allowed (or free-form) and not registered,
    unless the user has Sys.Modify on /."""
    if privileged:
        return None
    allowed, registered, freeform = allowed_tags(options, privileged, guest_tags)
    before, after = Counter(split_list(old)), Counter(split_list(new))
    for tag in sorted(set(before) | set(after)):
        if before[tag] != after[tag] and ((tag not in allowed and not freeform) or tag in registered):
            return f"Permission check failed (/, Sys.Modify for modifying tag '{tag}')"
    return None
