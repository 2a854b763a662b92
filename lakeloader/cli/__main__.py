"""`python -m lakeloader.cli`: the same as the `lakeloader` command."""

from lakeloader.cli import main

raise SystemExit(main())
