"""The extension in a production crawl: a plain CrawlerProcess script, then `crawlmem report` on its stream."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = '''
import sys
import scrapy
from scrapy.crawler import CrawlerProcess
from pytest_crawlmem.site import start_site


class Catalog(scrapy.Spider):
    name = "catalog"

    def parse(self, response):
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):
        yield {"name": response.css("h1.name::text").get()}


with start_site() as site:
    process = CrawlerProcess({
        "EXTENSIONS": {"pytest_crawlmem.extension.CrawlMemExtension": 0},
        "CRAWLMEM_ENABLED": True,
        "CRAWLMEM_JSONL": sys.argv[1],
        "CRAWLMEM_LOG_INTERVAL_SECONDS": 0.3,
        "CRAWLMEM_INTERVAL_SECONDS": 0.1,
        "LOG_LEVEL": "INFO",
    })
    process.crawl(Catalog, start_urls=[site.url("/catalog/?pages=30&per_page=20")])
    process.start()
'''


def test_a_production_crawl_logs_status_lines_and_streams_samples_that_crawlmem_report_renders(tmp_path: Path):
    script = tmp_path / "crawl.py"
    script.write_text(SCRIPT)
    stream = tmp_path / "crawlmem-samples.jsonl"
    proc = subprocess.run([sys.executable, str(script), str(stream)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = [line for line in proc.stderr.splitlines() if "crawlmem: rss=" in line]
    assert len(status) >= 2, proc.stderr[-3000:]
    assert all(f"{field}=" in status[0] for field in ("scheduled", "inflight", "active", "backout", "items", "responses"))
    assert "'crawlmem/peak_rss':" in proc.stderr
    kinds = [json.loads(line)["kind"] for line in stream.read_text().splitlines()]
    assert kinds[0] == "header" and kinds.count("checkpoint") >= 5 and kinds.count("sample") >= 5

    rendered = subprocess.run([sys.executable, "-m", "pytest_crawlmem", "report", str(stream)],
                              capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    page = (tmp_path / "report.html").read_text()
    assert "<svg" in page and "catalog" in page
