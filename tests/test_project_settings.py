"""Run inside a Scrapy project, crawl() starts from the project's settings, as `scrapy crawl` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from spiders_source import CATALOG_SPIDER

from pytest_crawlmem.harness.project import Project, ProjectError, find_project, nearest_scrapy_cfg, settings_module_of

SETTINGS = '''
DOWNLOADER_MIDDLEWARES = {"shopbot.middlewares.Counting": 543}
CONCURRENT_REQUESTS = 3
SHOPBOT_MARK = "from-project"
'''

MIDDLEWARES = '''
class Counting:
    @classmethod
    def from_crawler(cls, crawler):
        obj = cls()
        obj.stats = crawler.stats
        obj.mark = crawler.settings.get("SHOPBOT_MARK")
        return obj

    def process_request(self, request, spider=None):  # Scrapy 2.13 passes the spider
        self.stats.inc_value("shopbot/" + self.mark)
'''

TEST = '''
import scrapy

''' + CATALOG_SPIDER + '''

def test_it(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")], settings=SETTINGS,
                   isolate=ISOLATE)
    print("STATS", ",".join(sorted(k for k in result.stats if k.startswith("shopbot/"))) or "none")
'''


def make_project(pytester: pytest.Pytester, *, cfg: str = "[settings]\ndefault = shopbot.settings\n") -> None:
    pkg = pytester.mkpydir("shopbot")
    (pkg / "settings.py").write_text(SETTINGS)
    (pkg / "middlewares.py").write_text(MIDDLEWARES)
    (pytester.path / "scrapy.cfg").write_text(cfg)


def write_test(pytester: pytest.Pytester, settings: str = "None", isolate: bool = False, where: str = "") -> None:
    body = TEST.replace("SETTINGS,", f"{settings},").replace("ISOLATE", str(isolate))
    if where:
        (pytester.path / where).mkdir(parents=True, exist_ok=True)
        (pytester.path / where / "test_crawl.py").write_text(body)
    else:
        pytester.makepyfile(test_crawl=body)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", *args, timeout=300)


@pytest.mark.parametrize("isolate", [False, True])
def test_a_crawl_in_a_project_runs_with_the_projects_components(pytester: pytest.Pytester, isolate: bool) -> None:
    make_project(pytester)
    write_test(pytester, isolate=isolate)
    outcome = run(pytester)
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*STATS shopbot/from-project"])


def test_the_tests_settings_go_on_top_like_scrapy_crawl_s(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    write_test(pytester, settings='{"SHOPBOT_MARK": "from-test"}')
    outcome = run(pytester)
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*STATS shopbot/from-test"])


def test_the_project_is_found_from_the_test_file_whatever_the_working_directory(pytester: pytest.Pytester) -> None:
    project = pytester.path / "project"
    project.mkdir()
    (project / "shopbot").mkdir()
    (project / "shopbot" / "__init__.py").write_text("")
    (project / "shopbot" / "settings.py").write_text(SETTINGS)
    (project / "shopbot" / "middlewares.py").write_text(MIDDLEWARES)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = shopbot.settings\n")
    write_test(pytester, where="project/tests")
    outcome = run(pytester, "project/tests")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*STATS shopbot/from-project"])


def test_scrapy_settings_module_names_the_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_project(pytester, cfg="[settings]\ndefault = nothing.here\n")
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "shopbot.settings")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    write_test(pytester)
    outcome = run(pytester)
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*STATS shopbot/from-project"])


@pytest.mark.parametrize("how", ["ini", "cli", "argument"])
def test_project_settings_can_be_turned_off(pytester: pytest.Pytester, how: str) -> None:
    make_project(pytester)
    write_test(pytester)
    args: tuple[str, ...] = ()
    if how == "ini":
        pytester.makeini("[pytest]\ncrawlmem_project_settings = false\n")
    elif how == "cli":
        args = ("--crawlmem-project-settings=false",)
    else:
        (pytester.path / "test_crawl.py").write_text(
            (pytester.path / "test_crawl.py").read_text().replace("isolate=False", "isolate=False, project_settings=False"))
    outcome = run(pytester, *args)
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*STATS none"])


def test_a_broken_project_fails_the_test_naming_the_file(pytester: pytest.Pytester) -> None:
    make_project(pytester, cfg="[deploy]\nproject = shopbot\n")
    write_test(pytester)
    outcome = run(pytester)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(
        ["the Scrapy project file */scrapy.cfg has no ?settings? default = <module> entry (to crawl without*"])


def test_an_unimportable_settings_module_fails_the_test_naming_it(pytester: pytest.Pytester) -> None:
    make_project(pytester, cfg="[settings]\ndefault = shopbot.setings\n")
    write_test(pytester)
    outcome = run(pytester)
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*cannot import the Scrapy project's settings module 'shopbot.setings' (from */scrapy.cfg)*"])


def test_a_bad_option_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_test(pytester)
    outcome = run(pytester, "--crawlmem-project-settings=my project")
    outcome.stderr.fnmatch_lines(["*invalid value 'my project' from command line --crawlmem-project-settings*"])


def test_the_project_lookup_follows_scrapy(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = one.settings\nother = two.settings\n")
    assert nearest_scrapy_cfg(tmp_path / "a" / "b") == tmp_path / "scrapy.cfg"
    assert find_project([tmp_path / "a"], {}) == Project("one.settings", str(tmp_path / "scrapy.cfg"), tmp_path)
    assert find_project([tmp_path / "a"], {"SCRAPY_PROJECT": "other"}).settings_module == "two.settings"
    assert find_project([tmp_path], {"SCRAPY_SETTINGS_MODULE": "env.settings"}) == Project("env.settings",
                                                                                         "SCRAPY_SETTINGS_MODULE")
    (tmp_path / "scrapy.cfg").write_text("[settings\n")
    with pytest.raises(ProjectError, match="cannot read the Scrapy project file"):
        settings_module_of(tmp_path / "scrapy.cfg")
