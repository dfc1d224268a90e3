"""In a large Scrapy project, finding what leaks costs what it costs in a small one (issue 52).

One inner pytest session (a subprocess, a real crawl of the fixture site) runs in a generated Scrapy project whose
``SPIDER_MODULES`` hold 300 spider modules beside the leaky spider it crawls by name (Scrapy's loader imports them
all, as ``scrapy crawl`` does). The holder search used to parse every loaded module of the project and walk every
module and class (minutes with thousands of modules, blocking the reactor, and counted in no pause). Work is
counted, not seconds: the generated modules' files the crawl process opens while it crawls (an audit hook), and the
roots the holder walk went through.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from inner_session import inner_session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from large_project_source import PACKAGE, marked_line, write_project

MODULES = 300

TEST = f'''
import json
import sys

import pytest
from scrapy.utils.misc import walk_modules

OPENED = []
WATCHING = [False]


def _audit(event, args):
    if WATCHING[0] and event == "open" and isinstance(args[0], str) and "/{PACKAGE}/spiders/site_" in args[0]:
        OPENED.append(args[0])


sys.addaudithook(_audit)


@pytest.mark.crawl_memory(leak="warn")
def test_leaky(crawl, fixture_site):
    walk_modules("{PACKAGE}.spiders")  # what the crawl's SpiderLoader imports, before the crawl is watched
    WATCHING[0] = True
    result = crawl("leaky", start_urls=[fixture_site.url("/catalog/?pages=20&per_page=20")])
    WATCHING[0] = False
    record = {{
        "verdict": result.verdict, "named": result.top_growth[0].location if result.top_growth else "",
        "holders": [h.path for h in result.holders], "opened": len(OPENED),
        "loaded": sum(1 for name in sys.modules if name.startswith("{PACKAGE}.spiders.site_")),
        "stats": {{k: v for k, v in result.stats.items() if k.startswith("crawlmem/")}},
    }}
    print("RESULT " + json.dumps(record))
'''


@pytest.fixture
def inner(pytester: pytest.Pytester) -> dict[str, Any]:
    """The inner session's record (one crawl of about 420 responses in the generated project), run once per module."""
    write_project(pytester.path, MODULES)
    (pytester.path / PACKAGE / "settings.py").write_text(f'SPIDER_MODULES = ["{PACKAGE}.spiders"]\n')
    (pytester.path / "scrapy.cfg").write_text(f"[settings]\ndefault = {PACKAGE}.settings\n")
    outcome, _ = inner_session(pytester, TEST, "[pytest]\n", "-s", timeout=600)
    lines = [line.partition("RESULT ")[2] for line in outcome.outlines if "RESULT " in line]  # -s: after the test's name
    assert lines, outcome.stdout.str()[-3000:] + outcome.stderr.str()[-2000:]
    record: dict[str, Any] = json.loads(lines[-1])
    return record


def test_the_leak_in_a_large_project_is_found_and_its_keeping_line_named(inner: dict[str, Any]) -> None:
    assert inner["loaded"] == MODULES
    assert inner["verdict"] == "retained-objects", inner
    assert inner["named"].endswith(marked_line("leaky", "KEEPS")), inner


def test_the_holder_search_reads_none_of_the_projects_other_spider_modules(inner: dict[str, Any]) -> None:
    """The storing line is searched in the files the traced window names: it used to parse all 300."""
    assert inner["opened"] == 0, inner
    assert 0 < inner["stats"]["crawlmem/attribution_files"] < 10, inner["stats"]


def test_the_holder_walk_goes_through_the_modules_the_crawl_reaches_not_every_loaded_one(inner: dict[str, Any]) -> None:
    """Every generated module and its spider class were roots (600 and more); the crawl reaches a few dozen."""
    assert 0 < inner["stats"]["crawlmem/attribution_roots"] < MODULES // 2, inner["stats"]


def test_the_time_finding_the_holders_is_counted_in_the_pauses_and_the_self_cpu(inner: dict[str, Any]) -> None:
    stats = inner["stats"]
    assert stats["crawlmem/attribution_seconds"] > 0, stats
    assert stats["crawlmem/checkpoint_pause_total_seconds"] >= stats["crawlmem/attribution_seconds"], stats
    assert stats["crawlmem/status/self_cpu_seconds"] >= stats["crawlmem/attribution_cpu_seconds"], stats
