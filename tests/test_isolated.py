"""Isolated crawls: the crawl runs in a fresh process, and a runaway one is killed."""

from __future__ import annotations

import json

import pytest
from spiders_source import SPIDERS

BLOCKING = '''

class Swallower(Catalog):
    """A callback that allocates in a loop and never returns to the reactor."""

    name = "swallower"

    def parse(self, response):
        data = []
        while True:
            data.append(b"x" * 2**20)
            time.sleep(0.005)
'''


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(spiders=SPIDERS + BLOCKING)
    return pytester


def run(pytester: pytest.Pytester, body: str, marker: str = "") -> pytest.RunResult:
    pytester.makepyfile(test_iso=f"""
import pytest
from spiders import *

{marker}
def test_it(crawl, fixture_site):
{body}
""")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)


def test_an_isolated_crawl_runs_in_another_process_and_returns_the_same_result_shape(suite):
    outcome = run(suite, """
    Hoarder.kept.clear()
    result = crawl(Hoarder, start_urls=[fixture_site.url("/catalog/?pages=5&per_page=20")], isolate=True)
    assert Hoarder.kept == [], "the spider ran in this process"
    assert result.responses == 105 and result.items_scraped == 100
    assert result.peak_rss >= result.start_rss > 0
    assert result.status_counts == {200: 105}
    assert result.stats["crawlmem/peak_rss"] == result.peak_rss
    assert len(result.samples) >= 1 and result.growth.checkpoints
""", '@pytest.mark.crawl_memory(peak_rss="2 GiB")')
    outcome.assert_outcomes(passed=1)
    report = json.loads((suite.path / ".crawlmem" / "test_iso.py__test_it" / "report.json").read_text())
    assert report["result"]["responses"] == 105


def test_a_child_that_ignores_kill_at_is_killed_and_its_samples_are_kept(suite):
    outcome = run(suite, """
    result = crawl(Swallower, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=2")], isolate=True)
    assert result.finish_reason == "crawlmem_kill_at"
    assert result.peak_rss >= 500 * 2**20
    assert len(result.samples) >= 3
""", '@pytest.mark.crawl_memory(kill_at="500 MiB")')
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines([
        "*crawl_memory budget broken: RSS reached * MiB and the crawl did not stop within 2 s:"
        " the isolated process was killed at the hard ceiling kill_at=500.0 MiB*"
    ])
    lines = (suite.path / ".crawlmem" / "test_iso.py__test_it" / "samples.jsonl").read_text().splitlines()
    assert sum('"kind":"sample"' in line for line in lines) >= 3


def test_a_spider_class_the_child_cannot_import_is_a_clear_error(suite):
    outcome = run(suite, """
    class Local(Catalog):
        name = "local"

    with pytest.raises(ValueError, match="isolate=True needs a spider class importable by name"):
        crawl(Local, start_urls=[fixture_site.url("/catalog/")], isolate=True)
""")
    outcome.assert_outcomes(passed=1)


def test_no_process_started_by_the_plugin_outlives_the_session(suite, monkeypatch):
    import subprocess
    import sys
    import time

    import psutil

    suite.makepyfile(test_procs="""
from spiders import Catalog

def test_in_process(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=3")])

def test_isolated(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=3")], isolate=True)
""")
    import uuid

    mark = uuid.uuid4().hex  # every process the inner session starts inherits it: other sessions' processes don't count
    monkeypatch.setenv("CRAWLMEM_TEST_MARK", mark)
    inner = suite.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_procs.py"],
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    out, _ = inner.communicate(timeout=300)
    assert inner.returncode == 0, out.decode()[-2000:]
    time.sleep(1.0)  # the site exits within 0.5 s of its parent
    leftovers = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if proc.environ().get("CRAWLMEM_TEST_MARK") == mark:
                leftovers.append(" ".join(proc.info["cmdline"] or []))
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    assert leftovers == []


def test_a_fixture_site_that_dies_mid_crawl_is_a_clear_failure_not_a_hang(suite):
    outcome = run(suite, """
    import os, signal

    class Killer(Catalog):
        name = "killer"
        seen = 0

        def parse_product(self, response):
            Killer.seen += 1
            if Killer.seen == 10:
                os.kill(fixture_site.pid, signal.SIGKILL)
            yield from super().parse_product(response)

    crawl(Killer, start_urls=[fixture_site.url("/catalog/?pages=20&per_page=20")], settings={"RETRY_TIMES": 0})
""")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(
        ["*the fixture site (pid *) died during the crawl with exit code -9; the crawl got * responses*"]
    )


@pytest.mark.parametrize(("ini", "args"), [("", ("--crawlmem-isolate",)), ("crawlmem_isolate = true", ())])
def test_the_isolate_option_isolates_every_crawl(suite, ini, args):
    suite.makeini(f"[pytest]\n{ini}\n")
    suite.makepyfile(test_opt="""
from spiders import Hoarder

def test_it(crawl, fixture_site):
    Hoarder.kept.clear()
    result = crawl(Hoarder, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])
    assert result.items_scraped == 5
    assert Hoarder.kept == [], "the spider ran in this process"
""")
    suite.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300).assert_outcomes(passed=1)


def test_a_bad_isolate_ini_value_is_a_usage_error(suite):
    suite.makeini("[pytest]\ncrawlmem_isolate = sometimes\n")
    suite.makepyfile(test_x="def test_x():\n    pass\n")
    outcome = suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    outcome.stderr.fnmatch_lines(["*invalid value 'sometimes' from ini crawlmem_isolate: expected true or false*"])


def test_a_spider_that_raises_in_every_callback_is_reported_as_such(suite):
    outcome = run(suite, """
    class Broken(Catalog):
        name = "broken"

        def parse(self, response):
            raise ValueError("selector changed")

    crawl(Broken, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])
""")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(
        ["*every callback raised: 1 exceptions (ValueError) for 1 responses, so the crawl scraped 0 items*"]
    )
