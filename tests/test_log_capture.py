"""pytest's log capture at DEBUG is not the crawl's memory; the user's own log handlers are.

pytest keeps every captured record (and its text) until the test phase ends: at DEBUG a
clean catalog crawl used to read ``retained-objects`` at about 3 KiB/response. A user
handler that keeps records is a real leak (Requests and Responses in the records' args) and
must behave under test exactly as in production.
"""

from __future__ import annotations

import logging

import pytest
from spiders_source import CATALOG_SPIDER

from pytest_crawlmem.measure.logcapture import detached, is_capture_handler, spilled_log_capture

SPIDERS = '''
import logging

import scrapy

''' + CATALOG_SPIDER + '''

class KeepingHandler(logging.Handler):
    """A handler that queues every record and never drains (a leak reported in Scrapy's tracker)."""

    kept = []

    def emit(self, record):
        self.kept.append(record)
'''

CLEAN = '''
import pytest
from spiders import Catalog


@pytest.mark.crawl_memory(leak="fail")
def test_clean(crawl, fixture_site, caplog):
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=15&per_page=40")])
    assert result.responses == 615  # kept records (~3 KiB/response) are a leak this long a crawl catches
    assert result.verdict == "steady", result.growth.reason
    crawled = [r for r in caplog.records if r.getMessage().startswith("Crawled (200)")]
    assert len(crawled) == 615  # pytest still gets every record, after the crawl
'''

LEAKY = '''
import logging

import scrapy
from spiders import Catalog, KeepingHandler


def test_a_user_handler_keeping_records_is_a_leak_as_in_production(crawl, fixture_site):
    handler = KeepingHandler(level=logging.DEBUG)
    logging.getLogger("scrapy").addHandler(handler)
    try:
        result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=8&per_page=40")])  # 328 responses
    finally:
        logging.getLogger("scrapy").removeHandler(handler)
    assert result.verdict == "retained-objects", result.growth.reason
    scraped = [r for r in KeepingHandler.kept if r.msg.startswith("Scraped from")]
    assert len(scraped) == 320
    assert isinstance(scraped[0].args["src"], scrapy.http.Response)  # the record the handler got is untouched
'''

WAYS = {
    "cli": ["--log-level=DEBUG"],
    "log_cli": ["-o", "log_cli=true", "--log-level=DEBUG"],
    "ini": ["-c", "debug.ini"],
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_debug_log_capture_does_not_fake_a_leak_and_a_keeping_handler_is_one(pytester: pytest.Pytester, way: str) -> None:
    pytester.makepyfile(spiders=SPIDERS, test_clean=CLEAN, test_leaky=LEAKY)
    pytester.makefile(".ini", debug="[pytest]\nlog_level = DEBUG\n")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", *WAYS[way], timeout=600)
    outcome.assert_outcomes(passed=2)


def test_only_pytests_capture_handlers_are_spilled_and_they_get_every_record_back() -> None:
    from _pytest.logging import LogCaptureHandler

    logger = logging.getLogger("crawlmem-test-spill")
    logger.propagate = False
    capture, other = LogCaptureHandler(), KeepAll()
    logger.addHandler(capture)
    logger.addHandler(other)
    try:
        pinned = object()
        with spilled_log_capture(logger) as spilled:
            logger.warning("seen %s", pinned, extra={"spider": pinned})
            assert capture.records == []  # nothing kept in memory while the crawl runs
        assert spilled == 1
        assert [r.getMessage() for r in capture.records] == [f"seen {pinned}"]
        assert capture.records[0].args is None and isinstance(capture.records[0].spider, str)
        assert other.records[0].args == (pinned,) and other.records[0].spider is pinned
        assert f"seen {pinned}" in capture.stream.getvalue()
    finally:
        logger.removeHandler(capture)
        logger.removeHandler(other)
    assert is_capture_handler(capture) and not is_capture_handler(other)


def test_a_detached_record_keeps_the_traceback_as_text() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %d", (3,), exc_info=__import__("sys").exc_info())
    fields = detached(record)
    assert fields["msg"] == "failed 3" and fields["args"] is None and fields["exc_info"] is None
    assert "ValueError: boom" in fields["exc_text"]


class KeepAll(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
