"""Directory indexes: the GETs that list what lies below a path, each as PVE's handler writes its list.

PVE's ``index`` methods are hand-written lists (the key differs: ``name``, ``subdir``, ``id``, ``cmd``,
``method``, ``type``). The lists here are the current sources' (pve-manager, qemu-server, pve-container,
pve-storage, pve-access-control, pve-ha-manager, pve-network, pve-firewall, pve-cluster); an entry whose
child path the release's API does not have is left out, which gives the older release's list (PVE 8's
cluster index has no ``bulk-action``, its Ceph index no ``releases``).
"""

from __future__ import annotations

from typing import Any

from pvesim.api.registry import ApiError, Call, route
from pvesim.apischema import schema_paths


def _i(key: str, names: str) -> tuple[str, tuple[str, ...]]:
    """An index: the key its rows use and the names, in PVE's order."""
    return key, tuple(names.split())


# template -> (key, entries)
INDEXES: dict[str, tuple[str, tuple[str, ...]]] = {
    # pve-access-control src/PVE/API2/AccessControl.pm index: the subclasses, then ticket and password
    "/access": _i("subdir", "users groups roles acl domains openid tfa ticket password"),
    "/access/openid": _i("subdir", "auth-url login"),  # API2/OpenId.pm index
    # pve-manager PVE/API2/Cluster.pm index ($have_sdn: libpve-network-perl is always installed)
    "/cluster": _i(
        "name",
        "acme backup backup-info bulk-action ceph config firewall ha jobs log mapping metrics "
        "notifications nextid options qemu replication resources status tasks sdn",
    ),
    "/cluster/acme": _i("name", "account tos meta directories plugins challenge-schema"),
    "/cluster/backup-info": _i("subdir", "not-backed-up"),  # API2/Cluster/BackupInfo.pm index
    "/cluster/bulk-action": _i("name", "guest"),  # API2/Cluster/BulkAction.pm
    "/cluster/bulk-action/guest": _i("name", "start shutdown migrate suspend"),
    "/cluster/ceph": _i("name", "flags metadata restart-bulk status"),  # API2/Cluster/Ceph.pm cephindex
    "/cluster/config": _i("name", "nodes totem join qdevice apiversion"),  # pve-cluster ClusterConfig.pm
    "/cluster/firewall": _i("name", "aliases rules options groups ipset macros refs"),
    "/cluster/ha": _i("id", "status resources groups rules"),  # pve-manager API2/HAConfig.pm index
    "/cluster/ha/status": _i("name", "current manager_status disarm-ha arm-ha"),  # API2/HA/Status.pm
    "/cluster/jobs": _i("subdir", "schedule-analyze realm-sync"),  # API2/Cluster/Jobs.pm index
    "/cluster/mapping": _i("name", "dir pci usb"),  # API2/Cluster/Mapping.pm index
    "/cluster/metrics": _i("name", "server"),  # API2/Cluster/MetricServer.pm index
    "/cluster/notifications": _i("name", "endpoints matchers targets matcher-fields matcher-field-values"),
    "/cluster/notifications/endpoints": _i("name", "gotify sendmail smtp webhook"),
    "/cluster/sdn/fabrics": _i("subdir", "fabric node all"),  # pve-network API2/Network/SDN/Fabrics.pm
    # pve-manager PVE/API2/Nodes.pm index
    "/nodes/{node}": _i(
        "name",
        "aplinfo apt capabilities ceph certificates config disks dns firewall hardware hosts journal lxc "
        "migrateall netstat network qemu query-oci-repo-tags query-url-metadata replication report rrd "
        "rrddata scan sdn services spiceshell startall status stopall storage subscription suspendall "
        "syslog tasks termproxy time version vncshell vzdump wakeonlan",
    ),
    "/nodes/{node}/apt": _i("id", "changelog repositories update versions"),  # API2/APT.pm index
    "/nodes/{node}/capabilities": _i("name", "qemu"),  # API2/Capabilities.pm
    "/nodes/{node}/capabilities/qemu": _i("name", "cpu cpu-flags machines migration"),
    # API2/Ceph.pm index
    "/nodes/{node}/ceph": _i(
        "name",
        "cmd-safety cfg crush fs init log mds mgr mon osd pool releases restart restart-bulk rules start status stop",
    ),
    "/nodes/{node}/ceph/cfg": _i("name", "raw db value"),  # API2/Ceph/Cfg.pm index
    "/nodes/{node}/ceph/osd/{osdid}": _i("name", "metadata lv-info"),  # API2/Ceph/OSD.pm osdindex
    "/nodes/{node}/ceph/pool/{name}": _i("name", "status"),  # API2/Ceph/Pool.pm poolindex
    "/nodes/{node}/certificates": _i("name", "acme custom info"),  # API2/Certificates.pm index
    "/nodes/{node}/certificates/acme": _i("name", "certificate"),  # API2/ACME.pm index
    # pve-storage src/PVE/API2/Disks.pm index
    "/nodes/{node}/disks": _i("name", "list initgpt smart lvm lvmthin directory wipedisk zfs"),
    "/nodes/{node}/firewall": _i("name", "rules options log"),  # pve-firewall API2/Firewall/Host.pm
    "/nodes/{node}/hardware": _i("type", "pci usb"),  # pve-manager API2/Hardware.pm
    "/nodes/{node}/hardware/pci/{pci-id-or-mapping}": _i("method", "mdev"),
    # qemu-server src/PVE/API2/Qemu.pm vmdiridx (no config read); pve-container LXC.pm vmdiridx reads it
    "/nodes/{node}/qemu/{vmid}": _i(
        "subdir",
        "config cloudinit pending status unlink vncproxy termproxy migrate resize move rrd rrddata "
        "monitor agent snapshot spiceproxy sendkey firewall mtunnel remote_migrate",
    ),
    "/nodes/{node}/lxc/{vmid}": _i(
        "subdir",
        "config pending status vncproxy termproxy vncwebsocket spiceproxy migrate clone initlog rrd "
        "rrddata firewall snapshot resize interfaces",
    ),
    # qemu-server Qemu.pm vmcmdidx and pve-container LXC/Status.pm vmcmdidx (both read the config first)
    "/nodes/{node}/qemu/{vmid}/status": _i("subdir", "current start stop reset shutdown suspend reboot"),
    "/nodes/{node}/lxc/{vmid}/status": _i("subdir", "current start stop shutdown reboot migrate"),
    "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}": _i("cmd", "rollback config"),  # snapshot_cmd_idx
    "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}": _i("cmd", "rollback config"),
    # pve-firewall API2/Firewall/VM.pm index
    "/nodes/{node}/qemu/{vmid}/firewall": _i("name", "rules aliases ipset refs options"),
    "/nodes/{node}/lxc/{vmid}/firewall": _i("name", "rules aliases ipset refs options"),
    "/nodes/{node}/replication/{id}": _i("name", "schedule_now log status"),  # API2/Replication.pm index
    # pve-storage API2/Storage/Scan.pm index (glusterfs: stable-8 only, the release's API has it or not)
    "/nodes/{node}/scan": _i("method", "cifs glusterfs iscsi lvm nfs pbs zfs"),
    # pve-network API2/Network/SDN/Nodes/Status.pm sdnindex, Nodes/Zone.pm, Nodes/Vnet.pm, Nodes/Fabric.pm
    "/nodes/{node}/sdn": _i("subdir", "fabrics vnets zones"),
    "/nodes/{node}/sdn/zones/{zone}": _i("subdir", "content bridges ip-vrf"),
    "/nodes/{node}/sdn/vnets/{vnet}": _i("subdir", "mac-vrf"),
    "/nodes/{node}/sdn/fabrics/{fabric}": _i("subdir", "neighbors routes"),
    "/nodes/{node}/services/{service}": _i("subdir", "state start stop restart reload"),  # Services.pm
    # pve-storage src/PVE/API2/Storage/Status.pm diridx
    "/nodes/{node}/storage/{storage}": _i(
        "subdir",
        "content download-url file-restore import-metadata identity oci-registry-pull prunebackups rrd "
        "rrddata status upload",
    ),
    "/nodes/{node}/tasks/{upid}": _i("name", "log status"),  # pve-manager API2/Tasks.pm upid_index
}
# the config is read first: a guest that does not exist is PVE's 500
_READS_CONFIG = {
    "/nodes/{node}/lxc/{vmid}": "lxc",
    "/nodes/{node}/qemu/{vmid}/status": "qemu",
    "/nodes/{node}/lxc/{vmid}/status": "lxc",
}


def _index(template: str) -> Any:
    key, entries = INDEXES[template]

    def handler(call: Call) -> list[dict[str, str]]:
        gtype = _READS_CONFIG.get(template)
        if gtype:
            call.guest(gtype)
        if template == "/nodes/{node}/sdn/vnets/{vnet}":
            _vnet_access(call)
        paths = schema_paths(call.cluster.schema_version)
        return [{key: e} for e in entries if f"{template}/{e}" in paths]

    return handler


def _vnet_access(call: Call) -> None:
    """pve-network API2/Network/SDN/Vnets.pm check_vnet_access: the vnet's zone path, SDN.Audit."""
    sdn = call.cluster.sdn
    vnet = sdn.vnets.get(call.params["vnet"]) if sdn else None
    if vnet is None:
        raise ApiError(500, f"vnet '{call.params['vnet']}' does not exist")
    path = f"/sdn/zones/{vnet.zone}/{vnet.id}"
    if not call.can(path, "SDN.Audit"):
        raise ApiError(403, f"Permission check failed ({path}, SDN.Audit)")


for _template in INDEXES:
    route("GET", _template)(_index(_template))
