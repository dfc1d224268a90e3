"""pytest-xdist gives the same verdicts as a serial run: each worker has its own site, rows and reports merge."""

from __future__ import annotations

import json

import pytest
from spiders_source import SPIDERS

SUITE = """
import pytest
from spiders import Catalog, Hoarder

URL = "/catalog/?pages=30&per_page=20"  # 630 responses: a verdict needs 170; 4 KiB kept a product is caught


@pytest.mark.parametrize("spider", [Catalog, Hoarder, Catalog, Hoarder], ids=["clean-1", "leaky-1", "clean-2", "leaky-2"])
@pytest.mark.crawl_memory(leak="warn")
def test_crawl(crawl, fixture_site, spider):
    crawl(spider, start_urls=[fixture_site.url(URL)])
"""


def verdicts(pytester: pytest.Pytester) -> dict[str, tuple[str, int]]:
    found = {}
    for path in sorted((pytester.path / ".crawlmem").glob("*/report.json")):
        result = json.loads(path.read_text())["result"]
        found[path.parent.name] = (result["verdict"], result["responses"])
    return found


def kind(report_dir: str) -> str:
    """Which spider a report directory's crawl ran: ``leaky`` (Hoarder) or ``clean`` (Catalog)."""
    return "leaky" if "leaky" in report_dir else "clean"


def test_verdicts_under_xdist_match_a_serial_run(pytester):
    pytester.makepyfile(spiders=SPIDERS, test_suite=SUITE)
    # the serial reference crawls each spider once; under -n 2 each is crawled twice and every crawl must read as its
    # spider's serial one (a serial run of all four repeated two crawls of the same spider in one process, ~6 CPU-s)
    serial = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "test_suite.py::test_crawl[clean-1]",
                                           "test_suite.py::test_crawl[leaky-1]", timeout=600)
    serial.assert_outcomes(passed=2)
    serial_verdicts = {kind(name): verdict for name, verdict in verdicts(pytester).items()}
    assert serial_verdicts == {"clean": ("steady", 630), "leaky": ("retained-objects", 630)}, serial_verdicts
    for report in (pytester.path / ".crawlmem").glob("*/report.json"):
        report.unlink()
    parallel = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", timeout=600)
    parallel.assert_outcomes(passed=4)
    found = verdicts(pytester)
    assert len(found) == 4 and all(verdict == serial_verdicts[kind(name)] for name, verdict in found.items()), found
    # one merged table on the controller: a row per crawl, from both workers
    parallel.stdout.fnmatch_lines(["*crawl memory*"])
    rows = [line for line in parallel.stdout.lines if line.startswith("test_suite.py::test_crawl[") and " 630 " in line]
    assert len(rows) == 4, parallel.stdout.str()
    assert sum("retained-objects" in row for row in rows) == 2
