"""PVE and PBS I/O and its scheduling.

Everything that talks to a cluster or decides when a request goes out lives here: the client (the one
module that imports proxmoxer), its transport and decoding, the request pool, the read cache, admission
and budgets, the name inventories, the PBS link and the cluster registry.
"""
