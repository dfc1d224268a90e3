"""Installed, the plugin changes nothing for tests that do not crawl (a team's own suite), in any order.

A team's suite holds plain tests, ``asyncio.run()`` tests, pytest-asyncio tests and Twisted tests; each
inner session here mixes them with crawl tests and must pass all of them, whichever kind runs first, with
and without xdist. Each runs pytest in a subprocess (pytester).
"""

from __future__ import annotations

import importlib.util

import pytest
from spiders_source import SPIDERS

needs_pytest_asyncio = pytest.mark.skipif(
    importlib.util.find_spec("pytest_asyncio") is None, reason="pytest-asyncio is not installed (the test extra has it)"
)

TEAM_TESTS = '''
import asyncio

import pytest
import pytest_twisted
from twisted.internet import defer, reactor, task


def test_asyncio_run():
    async def answer():
        await asyncio.sleep(0)
        return 42
    assert asyncio.run(answer()) == 42


def test_no_loop_is_running():
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def test_a_new_loop_runs_until_complete():
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(asyncio.sleep(0, result=7)) == 7
    finally:
        loop.close()


@pytest_twisted.inlineCallbacks
def test_twisted_inline_callbacks():
    value = yield task.deferLater(reactor, 0.01, lambda: 5)
    assert value == 5


@pytest_twisted.ensureDeferred
async def test_twisted_ensure_deferred():
    value = await task.deferLater(reactor, 0.01, lambda: 6)
    assert value == 6


def test_a_plain_test_returning_a_deferred_is_waited_for():
    return task.deferLater(reactor, 0.01, lambda: None)


def test_plain():
    assert sum(range(4)) == 6
'''

ASYNCIO_TESTS = '''
import asyncio

import pytest
import pytest_asyncio


@pytest_asyncio.fixture
async def value():
    await asyncio.sleep(0)
    return 3


@pytest.mark.asyncio
async def test_pytest_asyncio(value):
    await asyncio.sleep(0)
    assert value == 3
    assert asyncio.get_running_loop() is not None
'''

CRAWL_TESTS = '''
import asyncio

import pytest
from spiders import Catalog


@pytest.mark.crawl_memory(leak="off")
def test_a_crawl(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=10")])
    assert result.items_scraped == 20


def test_asyncio_run_right_after_a_crawl():
    async def answer():
        return 1
    assert asyncio.run(answer()) == 1


@pytest.mark.crawl_memory(leak="off")
def test_another_crawl_after_asyncio_run(crawl, fixture_site):
    result = crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=10")])
    assert result.items_scraped == 10
'''

INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


@pytest.fixture
def team(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(spiders=SPIDERS, test_team=TEAM_TESTS, test_crawls=CRAWL_TESTS)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)


def test_a_team_suite_without_crawls_passes_as_without_the_plugin(team):
    with_plugin = run(team, "test_team.py")
    with_plugin.assert_outcomes(passed=7)
    without = run(team, "test_team.py", "-p", "no:crawlmem")
    without.assert_outcomes(passed=7)


@pytest.mark.parametrize("order", [("test_team.py", "test_crawls.py"), ("test_crawls.py", "test_team.py")])
def test_team_tests_and_crawl_tests_pass_together_in_either_order(team, order):
    outcome = run(team, *order)
    outcome.assert_outcomes(passed=10)


def test_team_tests_and_crawl_tests_pass_together_under_xdist(team):
    outcome = run(team, "-n", "2", "test_crawls.py", "test_team.py")
    outcome.assert_outcomes(passed=10)


@needs_pytest_asyncio
def test_pytest_asyncio_tests_pass_before_and_after_crawls(team):
    team.makepyfile(test_async=ASYNCIO_TESTS, test_zasync=ASYNCIO_TESTS)
    team.makefile(".ini", pytest=INI)
    outcome = run(team, "test_async.py", "test_crawls.py", "test_zasync.py")
    outcome.assert_outcomes(passed=5)


def test_a_reactor_the_team_installed_is_kept_and_crawls_run_in_subprocesses_with_one_warning(team):
    team.makeconftest("from twisted.internet import epollreactor\n\nepollreactor.install()\n")
    outcome = run(team, "test_crawls.py", "test_team.py", "-W", "always")
    outcome.assert_outcomes(passed=10, warnings=1)
    outcome.stdout.fnmatch_lines(["*runs Twisted's EPollReactor, installed before pytest-crawlmem*subprocess*"])
