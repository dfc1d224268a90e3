"""Report files: written after a crawl, read back, rendered and compared (any process; no pytest, no Scrapy).

May import: ``core`` and the governor's pure ``policy`` and ``context_policy`` (the names in ``governor.json``).
"""
