"""Entry point of ``python -m fixture_sites`` (site process)."""

from fixture_sites.cli import main

raise SystemExit(main())
