"""The measuring extension and what runs beside it in the crawl process.

Owns the Scrapy extension that measures a crawl (``extension``: samples, drained checkpoints, the exact peak), the
running crawl's status line, stats and Prometheus metrics (``status``, ``metrics``), the running leak watch
(``leakwatch``), the stop that escalates (``escalation``), the refill bookkeeping around checkpoints (``refill``),
media pipelines under measurement (``media``), the downloader middlewares that count dropped data (``middleware``), the
in-process runner (``runner``), the test pipeline (``testing``) and the Spidermon monitors (``spidermon``).
May import: ``core``, ``probes``, ``attribution``, ``browser``, ``governor`` and ``replay``.
"""
