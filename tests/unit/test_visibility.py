"""What PVE's privilege-filtered lists show a token (pve/visibility.py), read from the privilege map as
pve-access-control RPCEnvironment.pm get_effective_permissions builds it: a listed path is exact, an unlisted
default path (or ACL-tree path) has no privilege, anything else inherits unless an ACL on it hides it."""

from __future__ import annotations

from pve_steward.pve.visibility import CLUSTER_TASKS, GUESTS, HA, NODE_FIGURES, STORAGE, Visibility

AUDIT = {"Sys.Audit": 1, "VM.Audit": 1, "Datastore.Audit": 1}


def test_a_listed_path_is_exact() -> None:
    vis = Visibility({"/storage/local": {"Datastore.Audit": 1}, "/storage/nfs": {"VM.Audit": 1}})
    assert vis.sees(STORAGE, "local") is True
    assert vis.sees(STORAGE, "nfs") is False  # listed, without any privilege that shows the row


def test_an_unlisted_default_path_has_no_privilege_at_all() -> None:
    """A NoAccess entry on /storage leaves the always-computed default path out of the map."""
    vis = Visibility({"/": dict(AUDIT), "/storage/local": {"Datastore.Audit": 1}})
    assert vis.holds("/storage", ["Datastore.Audit"]) is False
    assert vis.sees(STORAGE, "ceph-vm") is False  # its nearest ancestor in the map holds nothing
    assert vis.sees(STORAGE, "local") is True
    assert vis.whole(STORAGE) is False


def test_an_object_inherits_only_where_the_acl_tree_shows_no_entry_hiding_it() -> None:
    perms = {"/": dict(AUDIT), "/vms": {"VM.Audit": 1}, "/access": {"Sys.Audit": 1}}
    assert Visibility(perms).sees(GUESTS, 101) is None  # no tree: a NoAccess ACL on /vms/101 would not show
    assert Visibility(perms, acl_paths=["/pool/web"]).sees(GUESTS, 101) is True
    hidden = Visibility(perms, acl_paths=["/vms/101"])  # in the tree, left out of the map: NoAccess
    assert hidden.sees(GUESTS, 101) is False and hidden.whole(GUESTS) is False
    assert Visibility(perms, acl_paths=["/pool/web"]).whole(GUESTS) is True
    assert Visibility(perms).whole(GUESTS) is None  # cannot tell without the tree


def test_a_single_path_answer_settles_what_the_map_cannot() -> None:
    vis = Visibility({"/vms": {"VM.Audit": 1}})
    assert vis.undecided(GUESTS, [101, 102]) == ["/vms/101", "/vms/102"]
    vis.learn("/vms/101", {})
    vis.learn("/vms/102", {"VM.Audit": 1})
    assert (vis.sees(GUESTS, 101), vis.sees(GUESTS, 102)) == (False, True)
    assert vis.whole(GUESTS) is False and vis.undecided(GUESTS, [101, 102]) == []


def test_gates_and_unread_privileges() -> None:
    auditor = Visibility({"/": {"Sys.Audit": 1}, "/nodes": {"Sys.Audit": 1}}, acl_paths=[])
    vm_only = Visibility({"/vms": {"VM.Audit": 1}}, acl_paths=[])
    assert auditor.whole(CLUSTER_TASKS) is True and vm_only.whole(CLUSTER_TASKS) is False
    assert auditor.whole(HA) is True and vm_only.whole(HA) is False
    assert vm_only.sees(NODE_FIGURES, "pve1") is False and auditor.sees(NODE_FIGURES, "pve1") is True
    unread = Visibility.unreadable("timeout")
    assert unread.sees(STORAGE, "x") is None and unread.whole(CLUSTER_TASKS) is None
    assert Visibility.everything().whole(STORAGE) is True and Visibility.everything().sees(GUESTS, 1) is True


def test_every_statement_names_what_is_hidden_and_the_privilege_that_shows_it() -> None:
    assert STORAGE.hidden("ceph-vm") == (
        "storage ceph-vm is not visible to this token: PVE lists it only with Datastore.Audit or "
        "Datastore.AllocateSpace on /storage/ceph-vm (/storage)"
    )
    assert CLUSTER_TASKS.hidden() == (
        "cluster tasks are not visible to this token: PVE lists them only with Sys.Audit on / (/cluster/tasks)"
    )
    assert STORAGE.reason() == (
        "not all visible to this token: PVE lists each only with Datastore.Audit or Datastore.AllocateSpace on "
        "/storage/<id> (/storage)"
    )
