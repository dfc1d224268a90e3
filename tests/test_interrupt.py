"""Ctrl-C during a crawl: the crawl closes early, its report is written, the session stops, nothing is left running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from spiders_source import CATALOG_SPIDER

from pytest_crawlmem.harness.interrupts import graceful_interrupts

ENDLESS = '''
import scrapy
''' + CATALOG_SPIDER + '''

class Endless(Catalog):
    """Walks a 100,000-page catalog: it would run for many minutes."""

    name = "endless"

    async def start(self):
        yield scrapy.Request(f"{self.base_url}/catalog/?pages=100000&per_page=5")

def test_it(crawl, fixture_site):
    crawl(Endless, base_url=fixture_site.base_url, isolate=ISOLATE)
'''


def lines_in(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


def interrupt_mid_crawl(pytester: pytest.Pytester, isolate: bool, send: Callable[[int], None]) -> tuple[str, int, Path]:
    """Run the endless crawl in its own pytest (its own process group), ``send(pid)`` once 30 samples are written;
    return the session's output, its exit code and the crawl's report dir, after checking nothing is left running."""
    pytester.makepyfile(test_endless=ENDLESS.replace("ISOLATE", str(isolate)))
    samples = pytester.path / ".crawlmem" / "test_endless.py__test_it" / "samples.jsonl"
    log = pytester.path / "session.log"
    session = pytester.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], stdout=log.open("wb"),
                             stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while lines_in(samples) < 30 and time.monotonic() < deadline and session.poll() is None:
            time.sleep(0.2)
        assert lines_in(samples) >= 30, f"the crawl did not start: {log.read_text()}"
        started = psutil.Process(session.pid).children(recursive=True)
        send(session.pid)
        session.wait(timeout=60)
    finally:
        if session.poll() is None:
            session.kill()
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]  # site (and child) gone
    return log.read_text(), session.returncode, samples.parent


def assert_closed_and_reported(report_dir: Path) -> None:
    """The crawl closed early as interrupted, and its report holds what it measured."""
    report = json.loads((report_dir / "report.json").read_text())["result"]
    assert report["finish_reason"] == "crawlmem_interrupted"
    assert report["responses"] >= 10
    assert report["samples"] >= 10
    assert (report_dir / "report.html").exists()


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_ctrl_c_closes_the_crawl_writes_its_report_and_stops_the_session(pytester, isolate):
    text, code, report_dir = interrupt_mid_crawl(pytester, isolate, lambda pid: os.kill(pid, signal.SIGINT))
    assert code == 2, text  # pytest's exit code for an interrupted session
    assert "KeyboardInterrupt: interrupted by SIGINT (Ctrl-C): the crawl was closed early" in text, text
    assert_closed_and_reported(report_dir)


@pytest.mark.parametrize(("isolate", "to"), [(False, "pytest"), (False, "group"), (True, "group")],
                         ids=["in-process-to-pytest", "in-process-to-group", "isolated-to-group"])
def test_sigterm_closes_the_crawl_as_scrapy_does_keeps_its_report_and_reports_interrupted(pytester, isolate, to):
    """A CI job's timeout or cancel: ``timeout`` sends SIGTERM to pytest and to its process group (the fixture site)."""
    def send(pid: int) -> None:
        if to == "group":
            os.killpg(pid, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)

    text, code, report_dir = interrupt_mid_crawl(pytester, isolate, send)
    assert code == 2, text
    assert "KeyboardInterrupt: interrupted by SIGTERM: the crawl was closed early" in text, text
    assert "illegal switch" not in text and "died during the crawl" not in text, text
    assert_closed_and_reported(report_dir)


def test_a_fixture_site_stopped_by_sigterm_reads_as_an_interrupted_run_not_a_crash(pytester):
    """A signal to the site alone (the crawl ends on connection errors): the test says the run was interrupted."""
    def send(pid: int) -> None:
        site = next(p for p in psutil.Process(pid).children() if "fixture_sites" in " ".join(p.cmdline()))
        site.send_signal(signal.SIGTERM)

    text, code, report_dir = interrupt_mid_crawl(pytester, False, send)
    assert code == 2, text
    assert "was stopped by SIGTERM during the crawl, from outside the test run" in text, text
    assert "died during the crawl" not in text, text
    assert json.loads((report_dir / "report.json").read_text())["result"]["responses"] >= 10


class FakeReactor:
    """A reactor not running yet: keeps what is to run when it starts."""

    running = False

    def __init__(self) -> None:
        self.when_running: list[Callable[[], None]] = []

    def callWhenRunning(self, callable: Callable[[], None]) -> None:
        self.when_running.append(callable)


def test_the_first_sigterm_closes_the_crawl_the_next_aborts_and_the_handlers_come_back(monkeypatch):
    reactor = FakeReactor()
    monkeypatch.setitem(sys.modules, "twisted.internet.reactor", reactor)
    before = signal.getsignal(signal.SIGTERM)
    firsts: list[int] = []
    with graceful_interrupts(firsts.append) as guard:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # what Twisted's reactor does as it starts
        for start in reactor.when_running:
            start()
        os.kill(os.getpid(), signal.SIGTERM)
        assert firsts == [signal.SIGTERM] and guard.interrupted
        assert guard.message == "interrupted by SIGTERM: the crawl was closed early; send SIGTERM again to abort at once"
        with pytest.raises(KeyboardInterrupt, match="SIGTERM again"):
            os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == before
    for start in reactor.when_running:  # a reactor that starts after the guard ended leaves the handlers alone
        start()
    assert signal.getsignal(signal.SIGTERM) == before

