"""The catalog project's pytest set-up: this directory (beside scrapy.cfg) goes on sys.path, so tests import
`catalogbot` as `scrapy crawl` does. pytest-crawlmem finds scrapy.cfg from the test files and starts every
crawl from `catalogbot.settings`."""
