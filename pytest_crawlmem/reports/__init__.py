"""Report files: written after a crawl, read back, rendered and compared (any process; no pytest, no Scrapy)."""
