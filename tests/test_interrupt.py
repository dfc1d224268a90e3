"""Ctrl-C during a crawl: the crawl closes early, its report is written, the session stops, nothing is left running."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from spiders_source import CATALOG_SPIDER

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


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_ctrl_c_closes_the_crawl_writes_its_report_and_stops_the_session(pytester, isolate):
    pytester.makepyfile(test_endless=ENDLESS.replace("ISOLATE", str(isolate)))
    samples = pytester.path / ".crawlmem" / "test_endless.py__test_it" / "samples.jsonl"
    log = pytester.path / "session.log"
    session = pytester.popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"], stdout=log.open("wb"),
                             stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while lines_in(samples) < 30 and time.monotonic() < deadline and session.poll() is None:
            time.sleep(0.2)
        assert lines_in(samples) >= 30, "the crawl did not start"
        started = psutil.Process(session.pid).children(recursive=True)
        session.send_signal(signal.SIGINT)
        session.wait(timeout=60)
    finally:
        if session.poll() is None:
            session.kill()
    text = log.read_text()
    assert session.returncode == 2, text  # pytest's exit code for an interrupted session
    assert "KeyboardInterrupt: interrupted by SIGINT (Ctrl-C): the crawl was closed early" in text, text
    report = json.loads((samples.parent / "report.json").read_text())["result"]
    assert report["finish_reason"] == "crawlmem_interrupted"
    assert report["responses"] >= 10
    assert report["samples"] >= 10
    assert (samples.parent / "report.html").exists()
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]  # site (and child) gone
