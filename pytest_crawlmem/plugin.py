"""pytest entry point: options, the ``crawl_memory`` marker, budget checks at test end (thin hooks)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_crawlmem.cluster.fixture import crawl_cluster  # noqa: F401 - registered with pytest through this module
from pytest_crawlmem.core.budgets import SPECS, BudgetError, Budgets, resolve_budgets
from pytest_crawlmem.core.settings import OPTIONS, resolve_settings
from pytest_crawlmem.harness.baseline import BaselineError
from pytest_crawlmem.harness.fixtures import browser_job, crawl, fixture_site  # noqa: F401 - registered with pytest through this module
from pytest_crawlmem.harness.loopstate import follow_reactor_greenlet
from pytest_crawlmem.harness.project import nearest_scrapy_cfg
from pytest_crawlmem.harness.reactor_tests import LOOP_STATE_KEY, foreign_reactor, runs_on_reactor, wait_if_deferred
from pytest_crawlmem.harness.session import (
    BUDGETS_KEY,
    MARKER_ERROR_KEY,
    RECORDS_KEY,
    SESSION_KEY,
    CrawlMemSession,
    CrawlMemWarning,
    CrawlRecord,
)
from pytest_crawlmem.harness.sweep_fixture import crawl_sweep  # noqa: F401 - registered with pytest through this module

#: Fixtures whose tests get their budgets enforced in the call phase.
MEASURING_FIXTURES = frozenset({"crawl", "browser_job", "crawl_cluster"})
MARKER_HELP = (
    "crawl_memory(**budgets): fail the test when a crawl run through the `crawl` fixture breaks a"
    " budget or shows the leak signature. Budgets: " + ", ".join(f"{n} ({s.help})" for n, s in SPECS.items() if s.enforced)
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--crawlmem-*`` options and their ``crawlmem_*`` ini twins, plus ini budget defaults."""
    group = parser.getgroup("crawlmem", "memory budgets of Scrapy crawls (pytest-crawlmem)")
    for option in OPTIONS:
        cli_help = option.help.replace("%", "%%")  # argparse %-formats help texts; the ini help is printed as is
        if option.switch:
            group.addoption(option.flag, dest=option.dest, action="store_true", default=None, help=cli_help)
        else:
            group.addoption(option.flag, dest=option.dest, default=None, metavar=option.metavar, help=cli_help)
        parser.addini(option.dest, option.help, default=None)
    for name, spec in SPECS.items():
        if spec.enforced and f"crawlmem_{name}" not in {o.dest for o in OPTIONS}:
            parser.addini(f"crawlmem_{name}", f"default {name} budget of every crawl_memory test: {spec.help}", default=None)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the marker, pick the asyncio reactor for pytest-twisted, resolve the settings."""
    config.addinivalue_line("markers", MARKER_HELP)
    put_project_on_path(config.rootpath, Path.cwd())
    if getattr(config.option, "reactor", None) == "default" and foreign_reactor() is None:
        config.option.reactor = "asyncio"  # Scrapy needs it; a reactor the team installed is left alone
    try:
        settings = resolve_settings(config.getoption, config.getini, config.rootpath)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc
    session = config.stash[SESSION_KEY] = CrawlMemSession(settings)
    try:
        mismatches = session.open_baselines(config.rootpath)
    except BaselineError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if not hasattr(config, "workerinput"):  # warn once, on the controller
        for message in mismatches:
            config.issue_config_time_warning(CrawlMemWarning(message), stacklevel=2)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> None:
    """Before a test module under a Scrapy project is imported, put the project's folder on sys.path (once per folder)."""
    if file_path.suffix == ".py":
        _project_of(file_path.parent)


@functools.lru_cache(maxsize=1024)
def _project_of(directory: Path) -> Path | None:
    return put_project_on_path(directory)


def put_project_on_path(*starts: Path) -> Path | None:
    """Append the folder holding the nearest ``scrapy.cfg`` (above rootdir, else the working directory) to sys.path.

    ``scrapy crawl`` does the same, so a project's tests import its package (``from myproject.items import ...``)
    without a root conftest.py or ``pythonpath = .``; a test file in a project below the rootdir puts its own
    project there before it is imported (``pytest_collect_file``), so a monorepo's run from its root imports too.
    """
    for start in starts:
        cfg = nearest_scrapy_cfg(start)
        if cfg is not None:
            if str(cfg.parent) not in sys.path:
                sys.path.append(str(cfg.parent))
            return cfg.parent
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Validate every ``crawl_memory`` marker at collection; a bad one fails its own test at setup, naming it."""
    for item in items:
        markers = list(item.iter_markers("crawl_memory"))
        if markers:
            try:
                item.stash[BUDGETS_KEY] = marker_budgets(item, markers)
            except BudgetError as exc:
                item.stash[MARKER_ERROR_KEY] = str(exc)


def marker_budgets(item: pytest.Item, markers: list[pytest.Mark]) -> Budgets:
    """The test's budgets from its ``crawl_memory`` markers over the ini defaults; BudgetError naming the test."""
    for marker in markers:
        if marker.args:
            raise BudgetError(f"crawl_memory marker of {item.nodeid} takes keyword budgets only, got {marker.args!r}")
    return resolve_budgets(
        ((m.kwargs, f"crawl_memory marker of {item.nodeid}") for m in markers),
        item.config.stash[SESSION_KEY].settings.budget_defaults,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test whose marker is wrong errors at setup with the marker's message (every other test still runs)."""
    problem = item.stash.get(MARKER_ERROR_KEY, None)
    if problem is not None:
        pytest.fail(f"pytest-crawlmem usage error: {problem}", pytrace=False)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Keep asyncio's thread state with the reactor's greenlet, so tests that do not crawl never see its loop."""
    state = follow_reactor_greenlet()
    if state is not None:
        session.config.stash[LOOP_STATE_KEY] = state


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop following the reactor's greenlet (pytest-twisted has stopped it by now)."""
    state = config.stash.get(LOOP_STATE_KEY, None)
    if state is not None:
        state.uninstall()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run plain ``def`` tests beside the reactor, not inside its greenlet; enforce budgets of tests that measure.

    pytest-twisted runs every test inside the reactor's greenlet: there nothing can wait for the reactor (so
    ``crawl()`` could not block), and asyncio's loop is running (so ``asyncio.run()`` and pytest-asyncio could
    not). Tests that pytest-twisted decorated, and ``async def`` tests, still run on the reactor as before.
    """
    if runs_on_reactor(pyfuncitem.obj):
        return None
    # Private, on purpose: pytest's own pytest_pyfunc_call reads the same attribute. The public alternative
    # (the test's signature, filtered by funcargs) differs for mock.patch decorators and defaulted arguments.
    names = pyfuncitem._fixtureinfo.argnames
    outcome = pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names})
    wait_if_deferred(outcome)  # pytest-twisted waits for a Deferred a plain test returns: so do we
    if MEASURING_FIXTURES.intersection(pyfuncitem.fixturenames):
        # budgets are checked in the call phase, so xfail and the report see an ordinary failure
        records: list[CrawlRecord] = pyfuncitem.stash.get(RECORDS_KEY, [])
        pyfuncitem.config.stash[SESSION_KEY].enforce(pyfuncitem, records)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Record each crawl of the test for the summary and --junitxml, then let go of its results."""
    report = yield
    if call.when == "call":
        records: list[CrawlRecord] = item.stash.get(RECORDS_KEY, [])
        if not records and BUDGETS_KEY in item.stash and report.passed:
            _warn_marker_without_crawl(item)
        item.config.stash[SESSION_KEY].finish_test(item, report, records)
        item.stash[RECORDS_KEY] = []  # items live for the session: don't keep every crawl's samples alive
    return report


def _warn_marker_without_crawl(item: pytest.Item) -> None:
    """A crawl_memory marker on a test that ran no crawl checked nothing: warn, and say so in the summary."""
    message = (
        "the crawl_memory marker's budgets checked nothing: the test ran no crawl (call the `crawl` or"
        " `browser_job` fixture in it, or remove the marker)"
    )
    item.warn(CrawlMemWarning(message))
    item.config.stash[SESSION_KEY].notes.append(f"{item.nodeid}: {message}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Append this process's runs to the --crawlmem-save baseline; on an xdist worker, hand rows and notes to the controller."""
    crawlmem = session.config.stash[SESSION_KEY]
    crawlmem.save_baseline()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["crawlmem_rows"] = crawlmem.worker_rows()
        workeroutput["crawlmem_notes"] = crawlmem.notes
        workeroutput["crawlmem_sweeps"] = crawlmem.sweeps


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller, merge a finished worker's crawl rows."""
    output = getattr(node, "workeroutput", {})
    node.config.stash[SESSION_KEY].add_worker_rows(output.get("crawlmem_rows", []))
    node.config.stash[SESSION_KEY].notes.extend(output.get("crawlmem_notes", []))
    node.config.stash[SESSION_KEY].add_worker_sweeps(output.get("crawlmem_sweeps", []))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One row per crawl: test, responses, peak RSS, growth per response, verdict, outcome."""
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.summarize(terminalreporter, verbose=config.getoption("verbose") > 0)

