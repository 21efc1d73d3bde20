from pvesim.cli import main

raise SystemExit(main())
