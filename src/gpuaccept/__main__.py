from gpuaccept.cli import main

raise SystemExit(main())
