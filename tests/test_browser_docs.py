"""Every Python snippet of docs/browser.md and docs/production.md runs as written.

A snippet headed ``# test_<name>.py`` is a test file: pytester runs it (a subprocess). A snippet headed
``# settings.py`` is a project's settings: a plain ``scrapy crawl`` of the fixture site runs with them
(a browser crawl when they route downloads through scrapy-playwright). Skipped only where Chromium or
Playwright is missing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_crawlmem.browser.settings import BrowserNotFound, chromium_path

pytest.importorskip("scrapy_playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
try:
    chromium_path()
except BrowserNotFound as exc:  # pragma: no cover - CI installs chromium
    pytest.skip(str(exc), allow_module_level=True)

DOCS = Path(__file__).parents[1] / "docs"
PAGES = ("browser.md", "production.md")


def snippets(kind: str) -> list[tuple[str, str]]:
    """(page:name, code) of every ```python block of the pages whose first line is ``# <kind>...``."""
    found = []
    for page in PAGES:
        for code in re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S):
            first = code.splitlines()[0]
            if first.startswith(f"# {kind}"):
                found.append((f"{page}:{first[2:]}", code))
    return found


def test_the_pages_have_the_snippets_this_file_runs():
    python_blocks = sum(len(re.findall(r"```python\n", (DOCS / page).read_text())) for page in PAGES)
    assert python_blocks == len(snippets("test_")) + len(snippets("settings.py")), "a snippet no test runs"
    assert len(snippets("test_")) == 2 and len(snippets("settings.py")) == 2


@pytest.mark.parametrize(("name", "code"), snippets("test_"), ids=[n for n, _ in snippets("test_")])
def test_a_test_snippet_passes_as_written(pytester: pytest.Pytester, name: str, code: str) -> None:
    file_name = code.splitlines()[0][2:].removesuffix(".py")
    pytester.makepyfile(**{file_name: code})
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    outcome.assert_outcomes(passed=1)


SPIDER = '''
import scrapy


class Pages(scrapy.Spider):
    name = "pages"

    async def start(self):
        self.browser = "scrapy_playwright" in str(self.settings.getdict("DOWNLOAD_HANDLERS"))
        for number in range(8):
            meta = {"playwright": True, "playwright_include_page": True} if self.browser else {}
            yield scrapy.Request(f"{self.base_url}/js/{number}", meta=meta)

    async def parse(self, response):
        if self.browser:
            await response.meta["playwright_page"].close()
        yield {"url": response.url}
'''


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
@pytest.mark.parametrize(("name", "code"), snippets("settings.py"), ids=[n for n, _ in snippets("settings.py")])
def test_a_settings_snippet_runs_a_crawl_as_written(tmp_path: Path, fixture_site, name: str, code: str) -> None:
    """Plain ``scrapy crawl`` of a project whose settings.py is the snippet, unchanged (the spider module and the
    stream's path come on the command line), against the fixture site."""
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = project.settings\n")
    (tmp_path / "project" / "spiders").mkdir(parents=True)
    (tmp_path / "project" / "__init__.py").write_text("")
    (tmp_path / "project" / "settings.py").write_text(code)
    (tmp_path / "project" / "spiders" / "__init__.py").write_text("")
    (tmp_path / "project" / "spiders" / "pages.py").write_text(SPIDER)
    stream = tmp_path / "crawlmem-samples.jsonl"  # what production.md's settings name it
    scrapy = Path(sys.executable).parent / "scrapy"
    proc = subprocess.run([str(scrapy), "crawl", "pages", "-a", f"base_url={fixture_site.base_url}", "-s",
                           "SPIDER_MODULES=project.spiders", "-s", f"CRAWLMEM_JSONL={stream}", "-s", "LOG_LEVEL=INFO"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'item_scraped_count': 8" in proc.stderr, proc.stderr[-3000:]
    records = [json.loads(line) for line in stream.read_text().splitlines()]
    assert records[-1]["kind"] == "finish" and records[-1]["reason"] == "finished", records[-1]
    browser = "DOWNLOAD_HANDLERS" in code
    if browser:  # the browser's settings: the pages were rendered in the installed Chromium
        assert "'playwright/page_count': 8" in proc.stderr, proc.stderr[-3000:]
        # and the browser's figures reach the closing status line, the stats and the stream's finish record
        status = [line for line in proc.stderr.splitlines() if "crawlmem: rss=" in line]
        assert status and re.search(r" browser_pss=[\d.]+(KiB|MiB|GiB) pages=\d+ contexts=\d+", status[-1]), status
        assert re.search(r"'crawlmem/status/browser_pss_bytes': [1-9]\d*", proc.stderr), proc.stderr[-3000:]
        assert re.search(r"'crawlmem/browser_pss': [1-9]\d*", proc.stderr), proc.stderr[-3000:]
        assert records[-1]["browser"]["peak_pss_bytes"] > 0, records[-1]
    for command in commands(name.split(":")[0]):  # the page's shell commands of the stream, as written
        report = subprocess.run([str(Path(sys.executable).parent / command[0]), *command[1:]], capture_output=True,
                                text=True, timeout=120, cwd=tmp_path)
        assert report.returncode == 0, report.stderr[-3000:]
        assert (tmp_path / "report.html").exists(), report.stdout
        page = (tmp_path / "report.html").read_text()
        assert "no budget was set" in page and "the budgets were kept" not in page  # a production crawl sets none
        assert '<div class="value">finished</div>' in page
    if browser:  # the offline report of the browser crawl's stream names its browser's figures
        rendered = subprocess.run([sys.executable, "-m", "pytest_crawlmem", "report", str(stream)], capture_output=True,
                                  text=True, timeout=120, cwd=tmp_path)
        assert rendered.returncode == 0, rendered.stderr[-3000:]
        page = (tmp_path / "report.html").read_text()
        assert "browser PSS peak" in page and "most pages open" in page, page[-3000:]
        assert "no budget was set" in page and "the budgets were kept" not in page


def commands(page: str) -> list[list[str]]:
    """The ``crawlmem ...`` command lines of a page's plain ``` blocks (the comment after ``#`` left out)."""
    lines, fence = [], None  # fence: the language of the block the line is in ("" for a plain one), None outside
    for line in (DOCS / page).read_text().splitlines():
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
        elif fence == "":
            lines.append(line.split("#")[0].split())
    return [line for line in lines if line[:1] == ["crawlmem"]]


def test_the_production_page_has_the_report_command_its_settings_test_runs():
    assert commands("production.md") == [["crawlmem", "report", "crawlmem-samples.jsonl"]]
