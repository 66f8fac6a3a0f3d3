from gpuaccept.entry import main

raise SystemExit(main())
