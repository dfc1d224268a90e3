"""The pure core: records, units, settings, budgets and the growth verdict (any process).

Imports no pytest, Scrapy, threads or I/O, so every other room, an isolated child, a production crawl and the CLI can
use it. The verdict is ``growth`` (the entry), built on ``schedule`` (when checkpoints are taken), ``stages`` (the
other allocation stages), ``evidence`` (what the checkpoints show) and ``rules`` (the verdict rules, first match
wins), with ``trend``, ``leaktrend``, ``plateau``, ``excess`` and ``warmup``. May import: ``core`` only.
"""
