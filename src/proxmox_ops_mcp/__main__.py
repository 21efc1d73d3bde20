from proxmox_ops_mcp.cli import main

raise SystemExit(main())
