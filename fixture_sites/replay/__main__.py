"""Entry point of ``python -m fixture_sites.replay`` (replay process)."""

import sys

from fixture_sites.replay.cli import main

sys.exit(main())
