"""``python -m pytest_crawlmem``: the ``crawlmem`` command line."""

from __future__ import annotations

import sys

from pytest_crawlmem.reports.cli import main

if __name__ == "__main__":
    sys.exit(main())
