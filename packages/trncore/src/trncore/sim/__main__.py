"""Entry point of ``python -m trncore.sim`` (see :mod:`trncore.sim.cli`)."""

from trncore.sim.cli import main

raise SystemExit(main())
