"""``python -m pytest_crawlmem.docgen``: the stable command that regenerates the docs' tables.

The code lives in :mod:`pytest_crawlmem.reports.docgen`.
"""

import sys

from pytest_crawlmem.reports.docgen import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
