from pve_steward.cli import main

raise SystemExit(main())
