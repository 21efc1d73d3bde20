"""pve-steward: operate a Proxmox VE cluster from an AI assistant, the way a careful senior operator would."""

__version__ = "0.1.0"
