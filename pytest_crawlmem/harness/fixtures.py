"""The ``fixture_site`` and ``crawl`` fixtures (pytest process)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_crawlmem.browser.job import BrowserJob, JobFailed, JobOptions, run_browser_job
from pytest_crawlmem.core import stops
from pytest_crawlmem.core.budgets import (
    Budgets,
    check_budgets,
    nothing_measured,
    only_errors,
    snapshot_threshold,
    tracemalloc_frames,
)
from pytest_crawlmem.core.cluster import ClusterResult
from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.keywords import refuse_misspelt
from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.core.protocols import BrowserJobFunction, CrawlFunction
from pytest_crawlmem.core.replay import (
    MAX_COPIES,
    ReplayError,
    ReplayTarget,
    check_copies,
    check_outcome,
    check_start_urls,
    parse_knobs,
)
from pytest_crawlmem.core.replay_copies import check_item_keys
from pytest_crawlmem.core.schedule import AUTO_REPLAY_RESPONSES, auto_replay_copies
from pytest_crawlmem.governor.extension import resolve_budget
from pytest_crawlmem.harness.carryover import watching_class_state
from pytest_crawlmem.harness.failing import fail
from pytest_crawlmem.harness.interrupts import graceful_interrupts, interrupted_message
from pytest_crawlmem.harness.isolated import interrupt_children, run_isolated, spec_for
from pytest_crawlmem.harness.loopstate import with_reactor_loop
from pytest_crawlmem.harness.project import ProjectError, find_project, import_settings_module
from pytest_crawlmem.harness.reactor_tests import isolate_for_foreign_reactor
from pytest_crawlmem.harness.replay_notes import note_replay_copies
from pytest_crawlmem.harness.replay_site import running_replay
from pytest_crawlmem.harness.session import BUDGETS_KEY, RECORDS_KEY, SESSION_KEY, CrawlMemSession, CrawlMemWarning, CrawlRecord
from pytest_crawlmem.harness.site import RunningSite, SiteStartError, start_site
from pytest_crawlmem.harness.spider_names import SpiderNameError, resolve_spider
from pytest_crawlmem.measure.extension import interrupt_running_crawls
from pytest_crawlmem.measure.runner import CrawlOptions, run_crawl
from pytest_crawlmem.reports.report import write_reports

#: Set on the test item by ``crawl_sweep`` while its variants run (a variant that measured nothing loses, not fails).
SWEEPING_KEY = pytest.StashKey[bool]()


@pytest.fixture(scope="session")
def fixture_site() -> Iterator[RunningSite]:
    """The local fixture web site, in its own process for the whole session (one per xdist worker)."""
    try:
        site = start_site()
    except SiteStartError as exc:
        fail(f"the fixture site did not start: {exc}")
    try:
        yield site
    finally:
        site.close()


def _warner(item: pytest.Item) -> Callable[[str], None]:
    """Warn on the test, as a CrawlMemWarning."""
    return lambda message: item.warn(CrawlMemWarning(message))


def _blockon() -> Any:
    try:
        import pytest_twisted
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise pytest.UsageError("pytest-crawlmem needs pytest-twisted to run crawls") from exc
    return pytest_twisted.blockon


def _refuse_reactor_greenlet() -> None:
    """Fail clearly when ``crawl()`` is called where it cannot wait (an async test, a reactor callback)."""
    import greenlet
    import pytest_twisted

    # pytest-twisted has no public way to get the reactor's greenlet; getattr() keeps this a no-op if it moves.
    if greenlet.getcurrent() is getattr(pytest_twisted._instances, "gr_twisted", None):
        raise RuntimeError("crawl() blocks until the crawl ends: call it from a plain `def` test, not an async test")


def fail_if_site_died(request: pytest.FixtureRequest, result: CrawlResult) -> None:
    """A crawl against a fixture site that died part-way is a failure, not a short crawl; one a signal stopped is an
    interrupted run (KeyboardInterrupt, as pytest reports Ctrl-C)."""
    if "fixture_site" not in request.fixturenames:
        return
    site: RunningSite = request.getfixturevalue("fixture_site")
    code = site.process.poll()
    signal_name = site.stopped_by() if code is not None else None
    if signal_name is not None:  # a signal from outside the test run (a CI job's timeout or cancel): not a crash
        raise KeyboardInterrupt(
            f"interrupted: the fixture site (pid {site.pid}) was stopped by {signal_name} during the crawl, from outside"
            f" the test run; the crawl got {result.responses:,} responses before the end; report: {result.report_dir}"
        )
    if code is not None:
        tail = site.stderr_tail().strip().splitlines()[-5:]
        pytest.fail(
            f"the fixture site (pid {site.pid}) died during the crawl with exit code {code}; the crawl got"
            f" {result.responses:,} responses before the end; report: {result.report_dir}"
            + ("\n" + "\n".join(tail) if tail else ""),
            pytrace=False,
        )


def _fail_if_every_callback_raised(result: CrawlResult) -> None:
    """A crawl whose every callback raised measured nothing worth a verdict: say so."""
    raised = int(result.stats.get("spider_exceptions/count", 0) or 0)
    if result.responses and raised >= result.responses:
        prefix = "spider_exceptions/"
        kinds = sorted(k[len(prefix):] for k in result.stats if k.startswith(prefix) and k != prefix + "count")
        pytest.fail(
            f"every callback raised: {raised:,} exceptions ({', '.join(kinds)}) for {result.responses:,} responses,"
            f" so the crawl scraped {result.items_scraped:,} items and its memory figures describe a broken spider;"
            f" report: {result.report_dir}",
            pytrace=False,
        )


def resolve_project_settings(item: pytest.Item, session: CrawlMemSession, wanted: bool | str | None) -> str | None:
    """The settings module the crawl starts from: ``wanted`` (a module, or False for none), else the project's.

    The project is the one ``scrapy crawl`` would use from the test file's directory, then from the
    working directory (``SCRAPY_SETTINGS_MODULE`` first); the ``crawlmem_project_settings`` ini
    value (or ``--crawlmem-project-settings``) turns the lookup off or names a module.
    """
    choice = session.settings.project_settings if wanted is None or wanted is True else wanted
    if choice is False or choice in ("false", "off", "no", "0", ""):
        return None
    try:
        if isinstance(choice, str) and choice not in ("true", "on", "yes", "1", "auto"):
            project = find_project((), {"SCRAPY_SETTINGS_MODULE": choice})
        else:
            project = find_project((Path(str(item.path)).parent, Path.cwd()))
        if project is None:
            return None
        import_settings_module(project)
    except ProjectError as exc:
        problem = f"{exc} (to crawl without the project's settings: crawl(..., project_settings=False))"
    else:
        return project.settings_module
    pytest.fail(problem, pytrace=False)


def fail_if_nothing_measured(
    result: CrawlResult, budgets: Budgets | None, session: CrawlMemSession, variant: CrawlRecord | None = None
) -> None:
    """A crawl that got no response measured nothing: fail now, unless min_responses allows it.

    A ``crawl_sweep`` variant (its ``variant`` record given) does not fail the test here: the violation joins
    its record, so it is a losing row of the sweep, and the test fails when no variant kept the budgets.
    """
    minimum = budgets.min_responses if budgets is not None else session.settings.budget_defaults.get("min_responses")
    violation = nothing_measured(minimum if isinstance(minimum, int) else None, result)
    if violation is None:
        return
    if variant is None:
        pytest.fail(f"{violation.message}; report: {result.report_dir}", pytrace=False)
    if all(v.budget != violation.budget for v in variant.violations):
        variant.violations.append(violation)


def _note_carried_state(item: pytest.Item, result: CrawlResult, session: CrawlMemSession) -> None:
    """What an earlier crawl in this process left that changed this one: a warning and a line under the summary."""
    for note in result.notes:
        item.warn(CrawlMemWarning(note))
        session.notes.append(f"{item.nodeid}: {note}")


def _warn_if_only_errors(item: pytest.Item, result: CrawlResult, session: CrawlMemSession) -> None:
    """Every response was an HTTP error: warn, and say so in the summary."""
    message = only_errors(result)
    if message is not None:
        item.warn(CrawlMemWarning(message))
        session.notes.append(f"{item.nodeid}: {message}")


@contextlib.contextmanager
def replaying(
    replay: str | Path | None, copies: int | str, knobs: tuple[Any, Any, Any], spider_cls: type, start_urls: list[str] | None,
    item_keys: object = None,
) -> Iterator[ReplayTarget | None]:
    """Serve the recording ``replay`` while the crawl runs (nothing without one); a bad recording fails the test."""
    if replay is None:
        if item_keys is not None:
            fail(f"crawl(replay_item_keys={item_keys!r}) marks the items of replay copies: it needs replay=PATH")
        yield None
        return
    with contextlib.ExitStack() as stack:
        try:
            keys = check_item_keys(item_keys)
            parsed = parse_knobs(*knobs)
            target = stack.enter_context(running_replay(replay, copies=check_copies(1 if copies == "auto" else copies),
                                                        knobs=parsed))
            target = replace(_auto_replay_copies(target, copies), item_keys=keys)
            starts = start_urls if start_urls is not None else getattr(spider_cls, "start_urls", None)
            check_start_urls(target, starts if isinstance(starts, (list, tuple)) else None)
        except (ReplayError, ValueError) as exc:
            fail(str(exc))
        yield target


def _auto_replay_copies(target: ReplayTarget, copies: int | str) -> ReplayTarget:
    """``replay_copies="auto"``: copies enough for AUTO_REPLAY_RESPONSES responses (what a leak verdict needs to bound a
    leak at 1-2 KiB/response); any other value stands."""
    if copies != "auto":
        return target
    entries = int(target.summary.get("entries") or 1)
    return replace(target, copies=auto_replay_copies(entries, AUTO_REPLAY_RESPONSES, MAX_COPIES))


def fail_if_replay_found_nothing(target: ReplayTarget | None, result: CrawlResult | ClusterResult) -> None:
    """A replayed crawl (or cluster) that found none of its URLs in the recording measured 404 pages: say which."""
    if target is None:
        return
    try:
        check_outcome(target, result.replay_hits, result.replay_misses, result.replay_missed_urls)
    except ReplayError as exc:
        fail(f"{exc}; report: {result.report_dir}")


def interrupt_crawls(signum: int) -> None:
    """First Ctrl-C or SIGTERM during a crawl: close it (in-process or isolated) so its report is written."""
    interrupt_running_crawls(interrupted_message(signum))
    interrupt_children(signum)


def _fail_if_pages_left_open(result: CrawlResult) -> None:
    """Pages handed to callbacks and never closed hang a scrapy-playwright crawl: fail saying so."""
    left = result.browser.unclosed_pages if result.browser else 0
    if result.finish_reason == stops.UNCLOSED_PAGES or left:
        reason = result.stopped_because or (
            f"{left:,} pages handed to callbacks (playwright_include_page=True) were still open when the spider closed"
        )
        pytest.fail(f"{reason}; report: {result.report_dir}", pytrace=False)


def _check_governor(governor: str | int | None) -> None:
    """A bad ``crawl(governor=...)`` budget fails the test before the crawl starts (docs/governor.md)."""
    if governor is None:
        return
    try:
        resolve_budget(governor)
    except ValueError as exc:
        fail(f"crawl(governor={governor!r}): {exc}")


def keyword_options(func: Callable[..., Any]) -> tuple[str, ...]:
    """The keyword-only options of a fixture's callable (what a misspelt spider argument is checked against)."""
    return tuple(p.name for p in inspect.signature(func).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY)


def declared_arguments(spider: type | str) -> set[str]:
    """The arguments ``spider`` declares: its ``__init__``'s named parameters and its class attributes (none for a name)."""
    if not isinstance(spider, type):
        return set()
    try:
        parameters = list(inspect.signature(spider).parameters.values())  # the class's signature: its __init__'s
    except (TypeError, ValueError):
        parameters = []
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named | set(dir(spider))


def refuse_misspelt_options(
    fixture: str, spider_kwargs: Mapping[str, Any], options: Iterable[str], spider: type | str = ""
) -> None:
    """Fail the test when a spider argument is really a misspelt option of ``fixture()`` (``replay_copy=3``)."""
    message = refuse_misspelt(fixture, spider_kwargs, options, declared_arguments(spider))
    if message is not None:
        pytest.fail(message, pytrace=False)


def spider_by_name(spider: type | str, settings_module: str | None) -> type:
    """The spider class ``crawl()`` was given, or the project's spider of that name (a clear failure when unknown)."""
    try:
        return resolve_spider(spider, settings_module)
    except SpiderNameError as exc:
        fail(str(exc))


@pytest.fixture
def crawl(request: pytest.FixtureRequest) -> CrawlFunction:
    """Run a spider to the end, measured; return its :class:`CrawlResult`.

    Budgets of the test's ``crawl_memory`` marker are checked when the test ends, so the
    test can still assert on the result.
    """
    item = request.node
    session = request.config.stash[SESSION_KEY]
    budgets = item.stash.get(BUDGETS_KEY, None)
    records = item.stash.setdefault(RECORDS_KEY, [])
    wait = _blockon()

    @with_reactor_loop
    def run(
        spider_cls: type | str,
        *,
        start_urls: list[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        isolate: bool = False,
        project_settings: bool | str | None = None,
        replay: str | Path | None = None,
        replay_copies: int | str = 1,
        replay_latency: float | str | None = None,
        replay_drip: int | str | None = None,
        replay_inflate: float | None = None,
        replay_item_keys: Sequence[str] | None = None,
        governor: str | int | None = None,
        **spider_kwargs: Any,
    ) -> CrawlResult:
        _refuse_reactor_greenlet()
        _check_governor(governor if governor is not None else (settings or {}).get(name_of("budget")))
        project = resolve_project_settings(item, session, project_settings)
        spider_cls = spider_by_name(spider_cls, project)
        refuse_misspelt_options("crawl", spider_kwargs, keyword_options(run), spider_cls)
        options = CrawlOptions(
            report_dir=session.report_dir_for(item.nodeid, len(records) + 1),
            interval_seconds=session.settings.interval_seconds,
            tracemalloc_frames=tracemalloc_frames(budgets, session.settings.tracemalloc_frames),
            budgets=budgets or Budgets(),
            project_settings=project,
            snapshot_at_bytes=snapshot_threshold(budgets) if budgets else None,
        )
        knobs = (replay_latency, replay_drip, replay_inflate)
        with replaying(replay, replay_copies, knobs, spider_cls, start_urls, replay_item_keys) as target, \
                graceful_interrupts(interrupt_crawls) as interrupt:
            options = replace(options, replay=target, governor=governor)
            if isolate or session.settings.isolate or isolate_for_foreign_reactor(request.config, _warner(item)):
                spec = spec_for(spider_cls, start_urls=start_urls, settings=settings, spider_kwargs=spider_kwargs,
                                options=options)
                result = replace(run_isolated(spec), isolated=True)
            else:
                class_state = watching_class_state(request.config, item.nodeid, spider_cls)
                result = class_state(run_crawl(
                    spider_cls, wait=wait, start_urls=start_urls, settings=settings,
                    spider_kwargs=spider_kwargs, options=options,
                ))
        _record(item, result, budgets, records)
        _note_carried_state(item, result, session)
        note_replay_copies(item, session, target, result, replay_copies)  # per copy; what "auto" chose and got
        if interrupt.interrupted:  # the report is written: now stop the session as Ctrl-C (or SIGTERM) asked
            raise KeyboardInterrupt(f"{interrupt.message}; report: {result.report_dir}")
        fail_if_site_died(request, result)
        fail_if_replay_found_nothing(target, result)
        fail_if_nothing_measured(result, budgets, session, records[-1] if item.stash.get(SWEEPING_KEY, False) else None)
        _fail_if_every_callback_raised(result)
        _warn_if_only_errors(item, result, session)
        if budgets is None:  # with a marker, the budget check reports it
            _fail_if_pages_left_open(result)
        return result

    return run


@pytest.fixture
def browser_job(request: pytest.FixtureRequest) -> BrowserJobFunction:
    """Run an async Playwright function ``func(job)`` on the installed Chromium, measured like a crawl.

    ``job.browser`` is the launched browser, ``job.page_done()`` counts pages, ``await
    job.checkpoint()`` after each batch lets growth per page be judged, ``job.url(path)`` is a
    fixture-site URL. The test's ``crawl_memory`` budgets apply when the test ends.
    """
    item = request.node
    session = request.config.stash[SESSION_KEY]
    budgets = item.stash.get(BUDGETS_KEY, None)
    records = item.stash.setdefault(RECORDS_KEY, [])
    base_url = request.getfixturevalue("fixture_site").base_url if "fixture_site" in request.fixturenames else None

    @with_reactor_loop
    def run(func: Callable[[BrowserJob], Awaitable[Any]], *, launch: Mapping[str, Any] | None = None) -> CrawlResult:
        options = JobOptions(
            report_dir=session.report_dir_for(item.nodeid, len(records) + 1),
            interval_seconds=session.settings.interval_seconds,
            budgets=budgets or Budgets(),
            launch=launch,
        )
        try:
            result = run_browser_job(func, base_url=base_url, options=options)
        except JobFailed as exc:
            _record(item, exc.result, budgets, records)
            raise
        _record(item, result, budgets, records)
        return result

    return run


def _record(item: pytest.Item, result: CrawlResult, budgets: Any, records: list[CrawlRecord]) -> None:
    """Check the budgets, write the reports and keep the summary row of one measured run."""
    violations = check_budgets(budgets, result) if budgets is not None else []
    if result.report_dir is not None:
        write_reports(result.report_dir, result, test_id=item.nodeid, budgets=budgets, violations=violations)
    records.append(CrawlRecord(item.nodeid, result, budgets, violations))
