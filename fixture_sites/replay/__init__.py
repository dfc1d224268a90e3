"""The replay site: serves a recorded crawl (Scrapy HTTP cache, HAR, WARC) on loopback (replay process).

Started as ``python -u -m fixture_sites.replay --recording PATH``. Never imported by
``pytest_crawlmem``, which talks to it over HTTP only.
"""
