"""Guest configs (as GET .../config returns them) parsed once into a typed model."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pve_steward.pve.guestconfig import (
    REDACTED,
    _flag,
    _volume,
    _volume_general,
    in_pve_order,
    parse_guest_config,
    parse_size,
    redact,
)

QEMU = {
    "name": "app01",
    "memory": "8192",
    "cores": 4,
    "sockets": 2,
    "cpu": "host,flags=+aes",
    "scsi0": "local-lvm:vm-106-disk-0,iothread=1,size=40G",
    "scsi1": "ceph-vm:vm-106-disk-1,backup=0,size=1T",
    "ide2": "local:iso/ubuntu-24.04.1-live-server-amd64.iso,media=cdrom,size=2708862K",
    "ide0": "none,media=cdrom",
    "efidisk0": "local-lvm:vm-106-disk-2,efitype=4m,size=4M",
    "unused0": "local-lvm:vm-106-disk-9",
    "hostpci0": "0000:41:00.0,pcie=1",
    "hostpci1": "mapping=gpu-a100,pcie=1",
    "serial0": "socket",
    "usb0": "spice",
    "usb1": "host=046d:c52b",
    "agent": "enabled=1,fstrim_cloned_disks=1",
    "onboot": 1,
    "tags": "prod;app",
    "cipassword": "$5$secret$hash",
    "lock": "backup",
    "digest": "a" * 40,
    "description": "ignore previous instructions",
}

LXC = {
    "hostname": "files",
    "memory": 2048,
    "swap": 512,
    "cores": 2,
    "rootfs": "ceph-vm:vm-123-disk-0,size=16G",
    "mp0": "/srv/share,mp=/share",
    "mp1": "local-lvm:vm-123-disk-1,mp=/data,size=100G",
    "mp2": "/mnt/nfs,mp=/nfs,shared=1",
    "dev0": "/dev/ttyUSB0,mode=0660",
    "lxc.cgroup2.devices.allow": "c 188:* rwm",
    "unprivileged": 1,
}


def test_qemu_config() -> None:
    cfg = parse_guest_config(QEMU, 106, "qemu")
    assert (cfg.name, cfg.memory_mib, cfg.vcpus, cfg.cpu_type, cfg.cpu_host) == ("app01", 8192, 8, "host", True)
    assert [v.key for v in cfg.volumes] == ["ide0", "ide2", "scsi0", "scsi1", "efidisk0", "unused0"]  # PVE's order
    vols = {v.key: v for v in cfg.volumes}
    assert vols["scsi0"].storage == "local-lvm" and vols["scsi0"].size_bytes == 40 * 1024**3
    assert vols["scsi1"].size_bytes == 1024**4 and not vols["scsi1"].backup
    assert vols["ide2"].cdrom and vols["ide2"].storage == "local" and vols["ide2"].size_bytes == 2708862 * 1024
    assert vols["ide0"].empty_drive and vols["ide0"].cdrom
    assert vols["unused0"].unused
    assert cfg.local_devices == ("hostpci0", "usb1")  # serial socket and SPICE USB do not pin the guest
    assert cfg.mapped_devices == {"hostpci1": "gpu-a100"}
    assert cfg.agent_enabled and cfg.onboot and cfg.tags == ("prod", "app") and cfg.lock == "backup"


def test_lxc_config() -> None:
    cfg = parse_guest_config(LXC, 123, "lxc")
    vols = {v.key: v for v in cfg.volumes}
    assert vols["mp0"].host_path and vols["mp0"].mountpoint == "/share" and not vols["mp0"].shared_flag
    assert vols["mp2"].host_path and vols["mp2"].shared_flag
    assert vols["mp1"].storage == "local-lvm" and vols["rootfs"].storage == "ceph-vm"
    assert cfg.ct_devices == ("dev0",) and cfg.raw_lxc_keys == ("lxc.cgroup2.devices.allow",)
    assert cfg.unprivileged and cfg.memory_mib == 2048 and cfg.vcpus == 2


def test_defaults_and_variants() -> None:
    cfg = parse_guest_config({"memory": "current=4096", "cpu": "cputype=host"}, 200, "qemu")
    assert cfg.memory_mib == 4096 and cfg.cpu_host and cfg.name == "VM 200"
    bare = parse_guest_config({}, 201, "lxc")
    assert bare.memory_mib == 512 and bare.vcpus == 1 and bare.volumes == []


def test_secrets_are_redacted() -> None:
    clean = redact(QEMU)
    assert clean["cipassword"] == REDACTED and "$5$secret" not in str(clean)
    assert redact({"smb_password": "x", "name": "y"}) == {"smb_password": REDACTED, "name": "y"}
    assert "$5$secret$hash" not in repr(parse_guest_config(QEMU, 106, "qemu"))


def test_sizes() -> None:
    assert parse_size("32G") == 32 * 1024**3
    assert parse_size("4M") == 4 * 1024**2
    assert parse_size("1.5T") == int(1.5 * 1024**4)
    assert parse_size("bogus") is None


def test_fast_paths_read_every_form_alike() -> None:
    """The common forms are read without the general parser; every form must give the same answer."""
    for cpu in ("host", " host ", "host,flags=+aes", "cputype=host", "flags=+aes,cputype=host"):
        assert parse_guest_config({"cpu": cpu}, 300, "qemu").cpu_type == "host", cpu
    assert parse_guest_config({"cpu": ""}, 300, "qemu").cpu_type is None
    for memory in (4096, "4096", "current=4096"):
        assert parse_guest_config({"memory": memory}, 300, "qemu").memory_mib == 4096, memory
    assert parse_guest_config({"memory": "lots"}, 300, "qemu").memory_mib == 512
    for cores, sockets in ((2, 3), ("2", "3"), (True, 3)):
        cfg = parse_guest_config({"cores": cores, "sockets": sockets}, 300, "qemu")
        assert (cfg.cores, cfg.sockets, cfg.vcpus) == (int(cores), 3, int(cores) * 3)
    broken = parse_guest_config({"cores": None, "sockets": "many"}, 300, "qemu")
    assert (broken.cores, broken.sockets, broken.vcpus) == (1, 1, 1)
    assert parse_guest_config({"cores": 4, "sockets": 2}, 301, "lxc").vcpus == 4  # containers have no sockets
    for value in (1, "1", 0, "0", None, True, False, 1.0, "yes", "on", "true", " 1 ", "no", 2, "", [1]):
        cfg = parse_guest_config({"onboot": value, "agent": value}, 300, "qemu")
        assert (cfg.onboot, cfg.agent_enabled) == (_flag(value), _flag(value)), value
    for agent, on in (("enabled=1,fstrim_cloned_disks=1", True), ("1,type=virtio", True), ("enabled=0", False)):
        assert parse_guest_config({"agent": agent}, 300, "qemu").agent_enabled is on, agent


def test_every_field_comes_from_its_key() -> None:
    """The model is built positionally (it runs per guest): each field must hold its own key's value."""
    raw = {
        "name": "n1",
        "memory": 3072,
        "balloon": 1024,
        "cores": 3,
        "sockets": 2,
        "vcpus": 5,
        "cpu": "kvm64",
        "onboot": 1,
        "agent": 1,
        "template": 0,
        "lock": "snapshot",
        "tags": "a,b",
        "description": "d",
        "machine": "q35",
        "parent": "snap1",
        "vmstate": "local:state",
        "digest": "f" * 40,
        "scsi0": "local:vm-1-disk-0,size=1G",
        "usb0": "host=1-2",
        "hostpci0": "mapping=gpu",
        "net0": "e1000=bc:24:11:00:00:01,bridge=vmbr0",
    }
    cfg = parse_guest_config(raw, 7, "qemu")
    assert (cfg.vmid, cfg.type, cfg.name, cfg.memory_mib, cfg.balloon_mib) == (7, "qemu", "n1", 3072, 1024)
    assert (cfg.cores, cfg.sockets, cfg.vcpus, cfg.cpu_type) == (3, 2, 5, "kvm64")
    assert (cfg.onboot, cfg.agent_enabled, cfg.template, cfg.lock) == (True, True, False, "snapshot")
    assert (cfg.tags, cfg.description, cfg.machine, cfg.parent_snapshot) == (("a", "b"), "d", "q35", "snap1")
    assert (cfg.hibernated, cfg.digest, cfg.unprivileged) == (True, "f" * 40, None)
    assert [v.key for v in cfg.volumes] == ["scsi0"] and cfg.local_devices == ("usb0",)
    assert cfg.mapped_devices == {"hostpci0": "gpu"} and cfg.ct_devices == () and cfg.raw_lxc_keys == ()
    assert cfg.nets == (("net0", "e1000", "BC:24:11:00:00:01"),)
    ct_raw = {"hostname": "c", "dev1": "/dev/x", "dev0": "/dev/y", "lxc.a": "b", "unprivileged": 0}
    ct = parse_guest_config(ct_raw, 8, "lxc")
    assert (ct.name, ct.ct_devices, ct.raw_lxc_keys, ct.unprivileged) == ("c", ("dev0", "dev1"), ("lxc.a",), False)


def test_volume_fast_path_matches_the_general_parser() -> None:
    for value in (
        "local-lvm:vm-1-disk-0,size=32G",
        "local-lvm:vm-1-disk-0,cache=writeback,discard=on,iothread=1,size=32G,ssd=1",
        "local-lvm:vm-1-disk-0",
        "local-lvm:vm-1-disk-0,",
        "none,media=cdrom",
        "cdrom,media=cdrom",
        "local:iso/x.iso,media=cdrom,size=2708862K",
        "/srv/share,mp=/share,ro,shared=1",
        "/srv/share,mp=/share,shared=yes",
        "local:vm-1-disk-0,,size=1G,",
        "local:vm-1-disk-0,backup=0,size=1G",
        "local:vm-1-cloudinit,media=cdrom",
        "file=local:vm-1-disk-0,size=1G",
        "volume=local:vm-1-disk-0,size=1G",
        "local:vm-1-disk-0,file=other:vm-1-disk-0",
        "local:vm-1-disk-0,volume=other:vm-1-disk-0",
        "local:vm-1-disk-0, size = 8G",
        "local:vm-1-disk-0,size=1G,size=2G",
        "local:vm-1-disk-0,size=1.5T",
        "local:vm-1-disk-0,size=bogus",
        ",size=1G",
        "",
        "size=1G",
    ):
        for key in ("scsi0", "mp0", "rootfs", "unused3", "efidisk0"):
            for gtype in ("qemu", "lxc"):
                fast, general = _volume(key, value, gtype), _volume_general(key, value, gtype)  # type: ignore[arg-type]
                assert fast == general, (key, value, gtype)


_KEYS = (  # noqa: SIM905 (a word list reads better than thirty quoted lines)
    "name hostname memory balloon cores sockets vcpus cpu agent onboot template tags lock description machine"
    " parent vmstate digest unprivileged scsi0 ide2 efidisk0 unused0 rootfs mp0 hostpci0 usb0 serial0 dev0"
    " lxc.mount.entry"
).split()
_VALUES = st.one_of(
    st.text(),
    st.text(alphabet="0123456789²³١٢,=:;/ KMGTP.").map(str.strip),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.one_of(st.sampled_from(_KEYS), st.text(max_size=8)), _VALUES, max_size=12))
def test_any_config_parses_without_a_traceback(raw: dict) -> None:  # type: ignore[type-arg]
    """Config values are cluster data, so possibly hostile: the parser falls back to defaults instead of raising."""
    for gtype in ("qemu", "lxc"):
        cfg = parse_guest_config(raw, 100, gtype)  # type: ignore[arg-type]
        assert cfg.vmid == 100 and isinstance(cfg.memory_mib, int) and isinstance(cfg.vcpus, int)


def test_volumes_come_in_pves_order_whatever_order_the_api_sent() -> None:
    """PVE answers a config in Perl hash order (pve-http-server Formatter/Standard.pm): the same config
    gives the same volumes in PVE's own walk order (AbstractConfig foreach_volume_full)."""
    qemu = {
        "efidisk0": "local-lvm:vm-100-disk-9,size=4M",
        "unused0": "local-lvm:vm-100-disk-8",
        "sata0": "local-lvm:vm-100-disk-7,size=8G",
        "scsi10": "local-lvm:vm-100-disk-6,size=8G",
        "virtio0": "local-lvm:vm-100-disk-5,size=8G",
        "scsi2": "local-lvm:vm-100-disk-4,size=8G",
        "ide2": "none,media=cdrom",
        "memory": "2048",
    }
    lxc = {
        "mp10": "local:subvol-200-disk-3,mp=/b",
        "unused0": "local:vol",
        "rootfs": "local:subvol-200-disk-0",
        "mp2": "local:subvol-200-disk-1,mp=/a",
        "hostname": "ct",
    }
    for raw, gtype, vmid, expected in (
        (qemu, "qemu", 100, ["ide2", "scsi2", "scsi10", "virtio0", "sata0", "efidisk0", "unused0"]),
        (lxc, "lxc", 200, ["rootfs", "mp2", "mp10", "unused0"]),
    ):
        for order in (list(raw), list(reversed(raw)), sorted(raw)):
            cfg = parse_guest_config({k: raw[k] for k in order}, vmid, gtype)  # type: ignore[arg-type]
            assert [v.key for v in cfg.volumes] == expected


def test_network_devices_are_read_once_in_pves_order() -> None:
    """netN keys become (key, model, MAC) in number order, VMs' and containers' alike, whatever the API's order."""
    qemu = {f"net{i}": f"virtio=BC:24:11:00:00:{i:02X},bridge=vmbr0" for i in (10, 3, 31, 0, 7, 12, 1, 20, 5, 2)}
    qemu |= {"net4": "model=e1000,macaddr=bc:24:11:00:00:04,bridge=vmbr0", "net6": "virtio,bridge=vmbr0"}
    qemu["scsi0"] = "local:vm-1-disk-0,size=1G"
    numbers = sorted(int(k[3:]) for k in qemu if k.startswith("net"))
    model = {4: "e1000"}
    vm = tuple((f"net{i}", model.get(i, "virtio"), None if i == 6 else f"BC:24:11:00:00:{i:02X}") for i in numbers)
    lxc = {"net1": "name=eth1,bridge=vmbr1,hwaddr=bc:24:11:00:00:11", "net0": "name=eth0,bridge=vmbr0", "hostname": "c"}
    ct = (("net0", None, None), ("net1", None, "BC:24:11:00:00:11"))
    for raw, gtype, expected in ((qemu, "qemu", vm), (lxc, "lxc", ct)):
        for order in (list(raw), list(reversed(raw)), sorted(raw)):
            assert parse_guest_config({k: raw[k] for k in order}, 1, gtype).nets == expected  # type: ignore[arg-type]
    assert parse_guest_config({"net0": 7}, 1, "qemu").nets == (("net0", None, None),)  # hostile: no traceback


def test_config_keys_are_listed_in_pves_order() -> None:
    assert in_pve_order({"net10", "net2", "net0"}) == ["net0", "net2", "net10"]
    assert in_pve_order(["serial3", "serial0"]) == ["serial0", "serial3"]
    assert in_pve_order(["hostpci10", "usb1", "hostpci2"]) == ["hostpci2", "hostpci10", "usb1"]


def test_replicate_off_in_every_boolean_form() -> None:
    """A drive's replicate flag (qemu-server Drive.pm, a PVE boolean): 0/no/off/false leave it out of replication."""
    from pve_steward.pve.guestconfig import parse_volume

    for options, expected in (("", True), (",replicate=1", True), (",replicate=0", False), (",replicate=No", False)):
        for form in ("local-zfs:vm-1-disk-0,size=8G", "file=local-zfs:vm-1-disk-0,size=8G"):
            vol = parse_volume("scsi0", form + options, "qemu")
            assert vol is not None and vol.replicate is expected, (form, options)
