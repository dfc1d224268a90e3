"""Which interpreter measured a crawl (core/interpreter.py): recorded in report.json and in every baseline run, and a
comparison across interpreters says so instead of reporting a regression."""

from __future__ import annotations

import gc
import json
import platform
import shutil
import sysconfig

import pytest
from spiders_source import SPIDERS

from pytest_crawlmem.core.interpreter import describe, differences, other_interpreter
from pytest_crawlmem.reports import cli
from pytest_crawlmem.reports.report import environment, interpreter

HERE = {"implementation": "cpython", "version": "3.11.7", "free_threaded": False, "gc_threshold": [700, 10, 10]}


def test_the_interpreter_is_read_from_the_running_python():
    info = interpreter()
    assert info == {"implementation": "cpython", "version": platform.python_version(),
                    "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                    "gc_threshold": list(gc.get_threshold())}
    assert environment()["interpreter"] == info


def test_an_interpreter_is_described_with_its_build_and_collector():
    assert describe(HERE) == "CPython 3.11.7 (GIL, gc threshold 700/10/10)"
    free = {**HERE, "version": "3.13.0", "free_threaded": True}
    assert describe(free) == "CPython 3.13.0 (free-threaded, gc threshold 700/10/10)"


@pytest.mark.parametrize(("change", "named"), [
    ({"version": "3.14.2"}, "version '3.14.2' then, '3.11.7' here"),
    ({"free_threaded": True}, "free_threaded True then, False here"),
    ({"gc_threshold": [2000, 10, 10]}, "gc_threshold [2000, 10, 10] then, [700, 10, 10] here"),
    ({"implementation": "pypy"}, "implementation 'pypy' then, 'cpython' here"),
])
def test_each_fact_that_differs_is_named(change, named):
    assert differences({**HERE, **change}, HERE) == [named]
    assert differences(HERE, dict(HERE)) == []
    assert differences({"version": "3.12.1"}, {"free_threaded": True}) == []  # only what both recorded


def test_runs_of_another_interpreter_are_not_judged_but_one_matching_run_or_an_unrecorded_one_is():
    other = {**HERE, "version": "3.14.2"}
    sentence = other_interpreter([{"interpreter": other}, {"interpreter": other}], HERE)
    assert sentence is not None
    assert sentence.startswith("the baseline's runs were measured on CPython 3.14.2 (GIL, gc threshold 700/10/10),"
                               " this one on CPython 3.11.7")
    assert "not judged a regression" in sentence
    assert other_interpreter([{"interpreter": other}, {"interpreter": dict(HERE)}], HERE) is None
    assert other_interpreter([{"peak_rss": 1}], HERE) is None  # saved before interpreters were recorded


CRAWL = '''
import pytest
from spiders import *


@pytest.mark.crawl_memory(leak="off")
def test_small(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=20")])
'''


def test_a_comparison_across_interpreters_says_so_instead_of_failing(pytester: pytest.Pytester, capsys):
    pytester.makepyfile(spiders=SPIDERS, test_crawl=CRAWL)
    saved = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--crawlmem-save=main", timeout=300)
    saved.assert_outcomes(passed=1)
    (path,) = (pytester.path / ".crawlmem" / "baselines").glob("*/main.json")
    document = json.loads(path.read_text())
    (run,) = document["tests"]["test_crawl.py::test_small"]
    assert run["interpreter"] == interpreter()
    report = pytester.path / ".crawlmem" / "test_crawl.py__test_small"
    assert json.loads((report / "report.json").read_text())["environment"]["interpreter"] == interpreter()
    shutil.copytree(report, pytester.path / "first")

    regressed = {**run, "peak_rss": 1024, "peak_rss_above_start": 1, "rss_growth": 1}  # any crawl regresses on these
    document["tests"]["test_crawl.py::test_small"] = [regressed]
    path.write_text(json.dumps(document))
    same = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--crawlmem-compare=main", timeout=300)
    same.assert_outcomes(failed=1)  # the same interpreter: a regression fails
    same.stdout.fnmatch_lines(["*crawl_memory baseline: peak_rss regressed*"])

    document["tests"]["test_crawl.py::test_small"] = [{**regressed, "interpreter": {**run["interpreter"], "version": "3.14.2"}}]
    path.write_text(json.dumps(document))
    other = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--crawlmem-compare=main", timeout=300)
    other.assert_outcomes(passed=1)
    other.stdout.fnmatch_lines(["*test_crawl.py::test_small: not compared with baseline *main.json: the baseline's runs"
                                " were measured on CPython 3.14.2*comparable only within one interpreter build*"])
    assert "regressed" not in other.stdout.str()

    edited = json.loads((pytester.path / "first" / "report.json").read_text())
    edited["environment"]["interpreter"]["free_threaded"] = True
    (pytester.path / "first" / "report.json").write_text(json.dumps(edited))
    assert cli.main(["diff", str(pytester.path / "first"), str(report)]) == 0
    out = capsys.readouterr().out
    assert "interpreters differ: A ran on CPython" in out and "(free-threaded," in out
    assert "free_threaded True in A, False in B" in out
    assert cli.main(["diff", str(report), str(report)]) == 0
    assert "interpreters differ" not in capsys.readouterr().out
