"""The pure core: records, verdicts, budgets and tables (any process; imports no pytest, Scrapy, threads or I/O)."""
