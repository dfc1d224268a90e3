"""The governor's admission by cost, on real crawls: a request that alone passes the budget is said before it is
downloaded (one WARNING naming it, its cost and the budget that would fit; a stat; governor.json).

Each crawl is a plain ``CrawlerProcess`` (as ``scrapy crawl`` runs it) in a child process of a pytester subprocess.
The effect is large: each document announces 48 MiB (96 MiB with its parse) against a 100 MiB budget, where a Scrapy
process alone holds 40-80 MiB.
"""

from __future__ import annotations

import pytest

CHILD = '''
"""One crawl: python child_crawl.py BASE_URL SETTINGS_JSON OUT_JSON (a plain CrawlerProcess)."""
import json
import sys

import scrapy
from scrapy import signals
from scrapy.crawler import CrawlerProcess


class Huge(scrapy.Spider):
    """3 JSON documents of 48 MiB, each announced by its Content-Length."""

    name = "huge"

    async def start(self):
        for doc in range(3):
            yield scrapy.Request(f"{self.base}/json/{doc}?kb={48 * 1024}", cb_kwargs={"doc": doc})

    def parse(self, response, doc):
        yield {"id": doc, "bytes": len(response.body)}


def main():
    base, raw, out = sys.argv[1:4]
    Huge.base = base
    settings = {"LOG_LEVEL": "DEBUG", "ROBOTSTXT_OBEY": False, "TELNETCONSOLE_ENABLED": False,
                "MEMUSAGE_ENABLED": False, "LOGSTATS_INTERVAL": 0, "DOWNLOAD_MAXSIZE": 0, "DOWNLOAD_WARNSIZE": 0,
                **json.loads(raw)}
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Huge)
    process.crawl(crawler)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if isinstance(v, (int, float, str))}
    with open(out, "w") as f:
        json.dump({"stats": stats}, f)


if __name__ == "__main__":
    main()
'''

TESTS = '''
import json
import subprocess
import sys
from pathlib import Path

MIB = 2**20


def test_a_request_that_alone_passes_the_budget_is_said_before_it_is_downloaded(fixture_site, tmp_path):
    settings = {"CRAWLMEM_BUDGET": "100 MiB", "ADDONS": {"pytest_crawlmem.governor.GovernorAddon": 0},
                "CRAWLMEM_JSONL": str(tmp_path / "report" / "samples.jsonl"), "CONCURRENT_REQUESTS": 4}
    out, log = tmp_path / "out.json", tmp_path / "crawl.log"
    with open(log, "w") as err:
        subprocess.run([sys.executable, str(Path(__file__).parent / "child_crawl.py"), fixture_site.base_url,
                        json.dumps(settings), str(out)], stderr=err, check=True, timeout=600)
    lines = log.read_text().splitlines()
    warnings = [n for n, line in enumerate(lines) if "WARNING" in line and "budget cannot be met" in line]
    assert len(warnings) == 1, "\\n".join(lines[-40:])
    said = lines[warnings[0]]
    assert "/json/" in said and "budget of at least" in said and "100.0 MiB budget" in said, said
    crawled = [n for n, line in enumerate(lines) if "Crawled (200)" in line and "/json/" in line]
    assert crawled and warnings[0] < crawled[0], "said after the first document was downloaded"
    stats = json.loads(out.read_text())["stats"]
    assert stats["crawlmem/governor/unmeetable"] >= 1
    assert stats["crawlmem/governor/unmeetable_fits_bytes"] > 100 * MIB
    record = json.loads((tmp_path / "report" / "governor.json").read_text())
    first = record["unmeetable"][0]
    assert "/json/" in first["url"] and first["cost_bytes"] >= 48 * MIB and first["fits_bytes"] > 100 * MIB
    assert first["basis"] == "announced" and record["unmeetable_count"] == stats["crawlmem/governor/unmeetable"]
'''


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_the_governor_says_when_one_request_cannot_fit_the_budget(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(child_crawl=CHILD, test_admission_governed=TESTS)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-s", "-W", "ignore::DeprecationWarning",
                                            timeout=900)
    print("\n".join(outcome.outlines[-40:]))
    outcome.assert_outcomes(passed=1)
