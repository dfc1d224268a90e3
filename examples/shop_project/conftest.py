"""Puts the shop project on sys.path, as ``scrapy crawl`` does from the directory of scrapy.cfg."""

from __future__ import annotations

import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parent
if str(PROJECT) not in sys.path:
    sys.path.insert(0, str(PROJECT))
