"""A test that measured nothing never passes silently."""

from __future__ import annotations

import pytest
from spiders_source import SPIDERS

CLOSED_PORT = '''
import socket

import pytest
from spiders import *


def closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/"


def test_closed_port(crawl):
    crawl(Catalog, start_urls=[closed_port_url()], settings={"RETRY_TIMES": 1})


@pytest.mark.crawl_memory(min_responses=0)
def test_closed_port_expected(crawl):
    result = crawl(Catalog, start_urls=[closed_port_url()], settings={"RETRY_TIMES": 1})
    assert result.responses == 0


@pytest.mark.crawl_memory(min_responses=50)
def test_too_few(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])


def test_all_errors(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url(f"/status/404?n={i}") for i in range(3)])
    assert result.status_counts == {404: 3}


@pytest.mark.crawl_memory(peak_rss="1 GiB")
def test_marker_without_crawl():
    assert True
'''


def test_a_crawl_that_measured_nothing_fails_and_one_of_error_pages_or_no_crawl_warns(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(spiders=SPIDERS, test_nothing=CLOSED_PORT)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rw", timeout=300)
    outcome.assert_outcomes(passed=3, failed=2, warnings=2)
    outcome.stdout.fnmatch_lines([
        "*test_closed_port*",
        "the crawl got 0 responses, fewer than min_responses=1, so nothing was measured (download errors:"
        " 2 DownloadConnectionRefusedError; finish reason 'finished'); check the start URLs, or set"
        " crawl_memory(min_responses=0) if a crawl without responses is what this test expects; report: *",
    ])
    outcome.stdout.fnmatch_lines(["*the crawl got 6 responses, fewer than min_responses=50, so nothing was measured*"])
    outcome.stdout.fnmatch_lines([
        "*crawl memory*",
        "test_nothing.py::test_all_errors: every response of the crawl was an HTTP error (3 x 404): its memory"
        " figures describe error pages, not the pages the spider is written for",
        "test_nothing.py::test_marker_without_crawl: the crawl_memory marker's budgets checked nothing: the test ran no"
        " crawl*",
    ])
