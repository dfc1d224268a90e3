"""A Scrapy team's first hour (issue 28): misspelt options refused, spiders by name, cluster replay, a project layout.

Each test runs pytest in a subprocess (pytester), as a team runs its own suite.
"""

from __future__ import annotations

import importlib.util
import shutil
import textwrap

import pytest
from test_replay import SHOP_SPIDER, shop_har

needs_redis = pytest.mark.skipif(
    shutil.which("redis-server") is None or importlib.util.find_spec("scrapy_redis") is None,
    reason="redis-server or scrapy-redis is not installed (pip install -e '.[cluster]')",
)


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(shop_spider=SHOP_SPIDER)
    shop_har(pytester.path / "shop.har")
    return pytester


def test_a_misspelt_option_of_each_fixture_is_refused_and_spider_arguments_still_pass(shop):
    shop.makepyfile(test_typos='''
from shop_spider import Shop

def test_crawl_typo(crawl):
    crawl(Shop, replay="shop.har", replay_copy=3)

def test_cluster_typo(crawl_cluster):
    crawl_cluster(Shop, replay="shop.har", replay_copiess=5)

def test_sweep_typo(crawl_sweep):
    crawl_sweep(Shop, {"a": {}}, replay="shop.har", isolated=True)

def test_namespace(crawl):
    crawl(Shop, replay="shop.har", replay_speed=2)

def test_spider_argument(crawl):
    result = crawl(Shop, replay="shop.har", category="books")
    assert result.replay_hits == 4

def test_sweep_on_the_recording(crawl_sweep):
    sweep = crawl_sweep(Shop, {"two": {"CONCURRENT_REQUESTS": 2}, "eight": {"CONCURRENT_REQUESTS": 8}},
                        replay="shop.har", replay_copies=2, isolate=False)
    assert [(r.replay_hits, r.replay_misses) for r in sweep.results.values()] == [(8, 1), (8, 1)]
''')
    outcome = shop.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    outcome.assert_outcomes(failed=4, passed=2)
    outcome.stdout.fnmatch_lines([
        "*crawl() got replay_copy= (did you mean replay_copies=?): a keyword this close to one of its options*",
        "*crawl_cluster() got replay_copiess= (did you mean replay_copies=?)*",
        "*crawl_sweep() got isolated= (did you mean isolate=?)*",
        "*crawl() got replay_speed= (did you mean *",
    ])


PROJECT_SPIDER = '''
import scrapy


class ToScrapeCss(scrapy.Spider):
    name = "toscrape-css"

    def parse(self, response):
        for href in response.css("a.product::attr(href)").getall()[:3]:
            yield response.follow(href, self.parse_product)

    def parse_product(self, response):
        yield {"url": response.url}
'''


def startproject(pytester: pytest.Pytester, where: str = "") -> None:
    """A ``scrapy startproject quotesbot`` layout with a hyphenated spider module and a tests/ folder, no conftest."""
    root = pytester.path / where
    root.mkdir(parents=True, exist_ok=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = quotesbot.settings\n")
    package = root / "quotesbot"
    (package / "spiders").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(
        'BOT_NAME = "quotesbot"\nSPIDER_MODULES = ["quotesbot.spiders"]\nNEWSPIDER_MODULE = "quotesbot.spiders"\n'
        "ROBOTSTXT_OBEY = True\n"
    )
    (package / "items.py").write_text("PRODUCT_FIELDS = ('url',)\n")
    (package / "spiders" / "__init__.py").write_text("")
    (package / "spiders" / "toscrape-css.py").write_text(PROJECT_SPIDER)
    (root / "tests").mkdir()


def test_a_startproject_layout_imports_and_crawls_a_spider_by_name_without_a_conftest(pytester):
    startproject(pytester)
    (pytester.path / "tests" / "test_spiders.py").write_text(textwrap.dedent('''
        from quotesbot.items import PRODUCT_FIELDS

        def test_by_name(crawl, fixture_site):
            result = crawl("toscrape-css", start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])
            assert result.spider == "toscrape-css" and result.items_scraped == 3 and PRODUCT_FIELDS == ("url",)

        def test_isolated_by_name(crawl, fixture_site):
            result = crawl("toscrape-css", start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")], isolate=True)
            assert result.items_scraped == 3

        def test_unknown_name(crawl):
            crawl("toscrape_css")
    '''))
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "tests", timeout=300)
    outcome.assert_outcomes(passed=2, failed=1)
    outcome.stdout.fnmatch_lines([
        "*no spider named 'toscrape_css' in the project's SPIDER_MODULES (settings quotesbot.settings):"
        " did you mean 'toscrape-css'? known spiders: toscrape-css*",
    ])


def test_a_project_in_a_subfolder_imports_when_pytest_starts_above_it(pytester):
    startproject(pytester, "crawlers/quotes")
    (pytester.path / "crawlers" / "quotes" / "tests" / "test_import.py").write_text(
        "from quotesbot.items import PRODUCT_FIELDS\n\ndef test_it():\n    assert PRODUCT_FIELDS == ('url',)\n"
    )
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    outcome.assert_outcomes(passed=1)


def test_a_spider_name_outside_a_project_fails_saying_why(pytester):
    pytester.makepyfile("def test_it(crawl):\n    crawl('books')\n")
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*crawl('books') finds spiders by name in a Scrapy project's SPIDER_MODULES*"])


@needs_redis
def test_a_cluster_replays_its_recording_in_every_worker(shop):
    shop.makepyfile(test_cluster_replay='''
def test_it(crawl_cluster):
    from shop_spider import Shop
    result = crawl_cluster(Shop, workers=2, replay="shop.har", replay_copies=3)
    assert (result.replay_hits, result.replay_misses, result.items_scraped, result.lost) == (12, 1, 6, 0), result.errors
    assert result.replay_missed_urls == ("https://www.shop.example/gone",)  # one URL, whichever workers asked it
''')
    outcome = shop.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    outcome.assert_outcomes(passed=1)


def test_a_miss_counts_once_across_copies_and_an_absent_robots_txt_is_no_miss(shop):
    shop.makepyfile(test_misses='''
import pytest
from shop_spider import Shop

@pytest.mark.crawl_memory(max_replay_misses=1)
def test_it(crawl):
    result = crawl(Shop, replay="shop.har", replay_copies=5, settings={"ROBOTSTXT_OBEY": True})
    assert (result.replay_hits, result.replay_misses) == (20, 1)
    assert result.replay_missed_urls == ("https://www.shop.example/gone",)
    assert result.stats["crawlmem/replay/robots_absent"] == 5  # one robots.txt per copy host, each a 404
''')
    outcome = shop.runpytest_subprocess("-p", "no:cacheprovider", timeout=300)
    outcome.assert_outcomes(passed=1)


def test_every_bad_marker_is_reported_and_fails_only_its_own_test(pytester):
    pytester.makepyfile(test_markers='''
import pytest

@pytest.mark.crawl_memory(peak_rs="1 MiB")
def test_misspelt(crawl):
    pass

@pytest.mark.crawl_memory(leak_per_response=0)
def test_zero_tolerance(crawl):
    pass

@pytest.mark.crawl_memory("1 MiB")
def test_positional(crawl):
    pass

def test_neighbour():
    pass
''')
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    outcome.assert_outcomes(passed=1, errors=3)
    outcome.stdout.fnmatch_lines_random([
        "*unknown budget 'peak_rs' in crawl_memory marker of test_markers.py::test_misspelt: did you mean 'peak_rss'?*",
        "*invalid leak_per_response 0 in crawl_memory marker of test_markers.py::test_zero_tolerance: must be above 0*",
        "*crawl_memory marker of test_markers.py::test_positional takes keyword budgets only*",
    ])
    assert "CRAWLMEM_LEAK_PER_RESPONSE" not in outcome.stdout.str()


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_recording_an_unreachable_site_says_nothing_was_recorded_and_why(tmp_path):
    import re
    import socket
    import subprocess
    import sys

    with socket.socket() as closed:  # a port nothing listens on: every download is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = deadbot.settings\n")
    (tmp_path / "deadbot" / "spiders").mkdir(parents=True)
    (tmp_path / "deadbot" / "__init__.py").write_text("")
    (tmp_path / "deadbot" / "settings.py").write_text('SPIDER_MODULES = ["deadbot.spiders"]\nRETRY_ENABLED = False\n')
    (tmp_path / "deadbot" / "spiders" / "__init__.py").write_text("")
    (tmp_path / "deadbot" / "spiders" / "dead-site.py").write_text(
        f'import scrapy\n\nclass Dead(scrapy.Spider):\n    name = "dead"\n'
        f'    start_urls = ["http://127.0.0.1:{port}/a", "http://127.0.0.1:{port}/b"]\n'
    )
    done = subprocess.run([sys.executable, "-m", "pytest_crawlmem", "record", "dead", "-o", str(tmp_path / "rec")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    expected = r"crawlmem: error: 0 responses recorded, 2 download errors \(2 \w*ConnectionRefusedError; the first: GET"
    assert re.search(expected, done.stderr)
    assert f"http://127.0.0.1:{port}/" in done.stderr.splitlines()[-1]
    assert "no such file or directory" not in done.stderr


@needs_redis
def test_a_killed_worker_reads_the_same_everywhere_and_a_failed_cluster_says_failed(pytester):
    from spiders_source import CATALOG_SPIDER

    pytester.makepyfile(spiders="import scrapy\n" + CATALOG_SPIDER)
    # 30 ms a request: one worker alone takes 9 s, and the other wakes within Scrapy's 5 s heartbeat; without it,
    # one worker crawled all 315 responses before the other had one (a CI run under load), and the kill planned
    # after worker 0's third response never fired
    pytester.makepyfile(test_killed='''
import json
import pytest
from spiders import Catalog

@pytest.mark.crawl_memory(cluster_rss="1 MiB")
def test_it(crawl_cluster, fixture_site):
    url = fixture_site.url("/catalog/?pages=15&per_page=20")
    result = crawl_cluster(Catalog, workers=2, start_urls=[url], kill={"worker": 0, "after_responses": 3},
                           settings={"CRAWLMEM_CHECKPOINT_MIN_RESPONSES": 100000, "DOWNLOAD_DELAY": 0.03})
    print("SPIDERS", [w.spider for w in result.workers])
    print("REASON", result.reason)
    print("RESPONSES", [w.responses for w in result.workers])
''')
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-rA", timeout=300)
    outcome.assert_outcomes(failed=1)
    text = outcome.stdout.str()
    assert "SPIDERS ['catalog', 'catalog']" in text
    reason = text.split("REASON ", 1)[1].splitlines()[0]
    responses = eval(text.split("RESPONSES ", 1)[1].splitlines()[0])
    busiest = max(range(2), key=lambda i: responses[i])
    assert f"the busiest, worker {busiest} ({responses[busiest]:,} responses)" in reason, (reason, responses)
    assert "worker 0 (crawl 2: catalog)" in text.replace("[worker 0] (crawl 2: catalog)", "worker 0 (crawl 2: catalog)")
    report = next((pytester.path / ".crawlmem").glob("test_killed.py__test_it/report.html")).read_text()
    assert '<p class="verdict"><strong>failed</strong>' in report, report[:2000]


def test_baselines_live_in_the_baseline_dir_ci_keeps_between_jobs(pytester):
    from spiders_source import CATALOG_SPIDER

    pytester.makepyfile(spiders="import scrapy\n" + CATALOG_SPIDER)
    pytester.makepyfile(test_kept='''
from spiders import Catalog

def test_it(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=10")])
''')
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--crawlmem-save", "main", "--crawlmem-baseline-dir",
                                          "ci-baselines", "--crawlmem-report-dir", "job1", timeout=120)
    first.assert_outcomes(passed=1)
    saved = list((pytester.path / "ci-baselines").glob("*/main.json"))
    assert len(saved) == 1 and not (pytester.path / "job1" / "baselines").exists()
    pytester.makeini("[pytest]\ncrawlmem_baseline_dir = ci-baselines\n")  # the next job: a fresh report dir, the ini key
    second = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--crawlmem-compare", "main",
                                           "--crawlmem-report-dir", "job2", timeout=120)
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*test_kept.py::test_it: within tolerance of 1 run:*ci-baselines*main.json*"])
