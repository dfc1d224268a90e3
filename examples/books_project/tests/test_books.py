"""The books-css spider, unchanged, under its project's settings, replayed from its committed recording.

No conftest.py: pytest-crawlmem puts the folder holding scrapy.cfg on sys.path (as ``scrapy crawl`` does), so
``booksbot`` imports, and ``crawl("books-css")`` finds the spider through the project's SPIDER_MODULES.
The recording (``recordings/books``: robots.txt, 6 listing pages, 60 books) was written by
``python record_local.py --output recordings/books``.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from booksbot.items import BookItem

RECORDING = Path(__file__).resolve().parents[1] / "recordings" / "books"
RECORDED_RESPONSES, RECORDED_BOOKS = 67, 60
COPIES = 16  # the cluster's copies: 16 x 67 = 1,072 responses, shared by two workers


@pytest.mark.crawl_memory(peak_rss="1 GiB", leak="fail", max_replay_misses=0, timeout=300)
def test_the_books_spider_replayed_is_steady(crawl):
    result = crawl("books-css", replay=RECORDING, replay_copies="auto")  # as many copies as the verdict needs
    copies = result.replay_copies
    assert copies > 1, "67 recorded responses are too few for a verdict: auto serves more copies"
    assert result.spider == "books-css"
    assert result.replay_hits == copies * RECORDED_RESPONSES and result.replay_misses == 0
    assert result.items_scraped == copies * RECORDED_BOOKS  # the project's PricePipeline dropped none
    assert result.stats["robotstxt/request_count"] == copies  # the project's ROBOTSTXT_OBEY = True, one per copy's host
    assert set(BookItem.fields) == {"url", "name", "price"}
    assert result.verdict == "steady", result.growth.reason


@pytest.mark.skipif(shutil.which("redis-server") is None or importlib.util.find_spec("scrapy_redis") is None,
                    reason="crawl_cluster needs the cluster extra (pip install -e '.[cluster]') and redis-server")
@pytest.mark.crawl_memory(lost=0, cluster_rss="2 GiB", leak="fail", max_replay_misses=0, timeout=300)
def test_the_books_spider_on_two_scrapy_redis_workers_loses_nothing(crawl_cluster):
    result = crawl_cluster("books-css", workers=2, replay=RECORDING, replay_copies=COPIES)
    assert result.lost == 0 and result.processed_twice == 0
    assert result.items_scraped == COPIES * RECORDED_BOOKS
    assert len(result.workers) == 2  # how the queue splits between them depends on the machine's pace
    assert result.verdict == "steady", result.reason
