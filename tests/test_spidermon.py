"""Spidermon monitors for production crawls (pytest_crawlmem/spidermon.py, core/jobstats.py): real Spidermon runs at
the close of real crawls (a CrawlerProcess script each, as a production job), and the judgement of stats alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from spiders_source import CATALOG_SPIDER

from pytest_crawlmem.core.jobstats import budget_finding, governor_finding, job_findings, leak_finding

pytest.importorskip("spidermon")

SCRIPT = '''
import sys
import scrapy
from scrapy.crawler import CrawlerProcess
from pytest_crawlmem.harness.site import start_site

''' + CATALOG_SPIDER + '''

class Hoarder(Catalog):
    kept = []

    def parse_product(self, response):
        self.kept.append(b"x" * 8192 + response.url.encode())
        yield from super().parse_product(response)


with start_site() as site:
    process = CrawlerProcess({
        "EXTENSIONS": {"pytest_crawlmem.extension.CrawlMemExtension": 0,
                       "spidermon.contrib.scrapy.extensions.Spidermon": 500},
        "CRAWLMEM_ENABLED": True,
        "CRAWLMEM_KILL_AT_BYTES": int(sys.argv[2]),
        "SPIDERMON_ENABLED": True,
        "SPIDERMON_SPIDER_CLOSE_MONITORS": ("pytest_crawlmem.spidermon.CrawlMemMonitorSuite",),
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
    })
    spider = {"leaky": Hoarder, "clean": Catalog}[sys.argv[1]]
    process.crawl(spider, start_urls=[site.url("/catalog/?pages=30&per_page=20")])
    process.start()
'''


def job(tmp_path: Path, spider: str, kill_at_bytes: int = 0) -> str:
    """Run the production script; its log (stderr)."""
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), spider, str(kill_at_bytes)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr


@pytest.mark.slow  # starts a crawl in a subprocess of its own
def test_spidermon_fails_a_leaking_job_with_the_verdict_and_passes_a_clean_one(tmp_path: Path):
    leaky = job(tmp_path, "leaky")
    assert "[Spidermon] crawlmem/no leak verdict... FAIL" in leaky, leaky[-4000:]
    assert "crawlmem leak verdict retained-objects: memory grew" in leaky, leaky[-4000:]
    assert "[Spidermon] crawlmem/no budget stopped the job... OK" in leaky, leaky[-4000:]
    clean = job(tmp_path, "clean")
    assert "[Spidermon] crawlmem/no leak verdict... OK" in clean, clean[-4000:]
    assert "... FAIL" not in clean, clean[-4000:]


@pytest.mark.slow  # starts a crawl in a subprocess of its own
def test_spidermon_fails_a_job_a_budget_stopped(tmp_path: Path):
    stopped = job(tmp_path, "clean", kill_at_bytes=2**20)  # 1 MiB: over it from the start
    assert "[Spidermon] crawlmem/no budget stopped the job... FAIL" in stopped, stopped[-4000:]
    assert "crawlmem stopped the job: budget kill_at (CRAWLMEM_KILL_AT_BYTES) broken (finish reason crawlmem_kill_at" in stopped


def test_the_findings_name_their_figures_and_nothing_is_found_in_a_quiet_job():
    assert job_findings({"crawlmem/verdict": "steady", "finish_reason": "finished"}) == []
    leak = leak_finding({"crawlmem/verdict": "retained-objects", "crawlmem/growth_per_response": 8192.0,
                         "response_received_count": 630, "crawlmem/peak_rss": 120 * 2**20})
    assert leak is not None and leak.message.startswith(
        "crawlmem leak verdict retained-objects: memory grew 8.0 KiB/response over 630 responses while the queues stayed"
        " flat (peak RSS 120.0 MiB); fix: look for references kept")
    governed = governor_finding({"finish_reason": "memory_budget", "crawlmem/governor/budget_bytes": 300 * 2**20})
    assert governed is not None and "budget of 300.0 MiB" in governed.message
    assert budget_finding({"finish_reason": "crawlmem_timeout"}) is not None
    assert budget_finding({"finish_reason": "finished"}) is None
    assert [f.kind for f in job_findings({"crawlmem/verdict": "browser-state", "finish_reason": "memory_budget"})] == [
        "leak", "governor"]
