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


def test_verdicts_under_xdist_match_a_serial_run(pytester):
    pytester.makepyfile(spiders=SPIDERS, test_suite=SUITE)
    serial = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", timeout=600)
    serial.assert_outcomes(passed=4)
    serial_verdicts = verdicts(pytester)
    assert {v for v, _ in serial_verdicts.values()} == {"steady", "retained-objects"}, serial_verdicts
    for report in (pytester.path / ".crawlmem").glob("*/report.json"):
        report.unlink()
    parallel = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", timeout=600)
    parallel.assert_outcomes(passed=4)
    assert verdicts(pytester) == serial_verdicts
    # one merged table on the controller: a row per crawl, from both workers
    parallel.stdout.fnmatch_lines(["*crawl memory*"])
    rows = [line for line in parallel.stdout.lines if line.startswith("test_suite.py::test_crawl[") and " 630 " in line]
    assert len(rows) == 4, parallel.stdout.str()
    assert sum("retained-objects" in row for row in rows) == 2
