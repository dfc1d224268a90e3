"""A crawl whose media downloads keep its checkpoints from draining says which downloads held the drain (issue 54).

A real crawl (an inner pytest session, ``runpytest_subprocess``): every fourth product's file is a page that answers in
3 s, under a 2 s DOWNLOAD_TIMEOUT with 2 retries, so each of those FilesPipeline downloads stays in flight about 6 s,
past the 5 s drain timeout; the catalog's own pages share their download slot, so media downloads are in flight at
every checkpoint. The verdict is ``inconclusive`` (too few drained checkpoints) and names the media pipeline's
downloads, their URLs and their retries; before, it said only that checkpoints did not drain.
"""

from __future__ import annotations

import json

import pytest

SUITE = '''
import pytest
import scrapy


class Products(scrapy.Spider):
    name = "products"
    custom_settings = {"CONCURRENT_ITEMS": 4}

    async def start(self):
        for url in self.start_urls:
            yield scrapy.Request(url)

    def parse(self, response):
        yield from response.follow_all(css="a.product", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response):
        pid = int(response.url.rsplit("/", 1)[1])
        files = [response.urljoin(f"/slow/{pid}?ms=3000")] if pid % 4 == 0 else []
        yield {"name": response.css("h1.name::text").get(), "file_urls": files}


@pytest.mark.crawl_memory(leak="warn")
def test_media(crawl, fixture_site, tmp_path):
    crawl(Products, start_urls=[fixture_site.url("/catalog/?pages=15&per_page=20")],
          settings={"ITEM_PIPELINES": {"scrapy.pipelines.files.FilesPipeline": 1},
                    "FILES_STORE": str(tmp_path / "files"), "DOWNLOAD_TIMEOUT": 2, "RETRY_TIMES": 2})
'''


def test_an_inconclusive_verdict_names_the_media_downloads_that_held_the_drain(pytester: pytest.Pytester):
    (pytester.path / "test_suite.py").write_text(SUITE)
    pytester.makeini("[pytest]\n")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "test_suite.py", timeout=900)
    outcome.assert_outcomes(passed=1)
    result = json.loads((pytester.path / ".crawlmem" / "test_suite.py__test_media" / "report.json").read_text())["result"]
    reason = result["growth"]["reason"]
    assert result["verdict"] == "inconclusive", reason
    assert "did not drain" in reason, reason
    held = reason.split("the last was held by the media pipelines' ", 1)[1]
    assert "downloads of FilesPipeline (http://127.0.0.1:" in held and "/slow/" in held, held
    assert "retried" in held, held
