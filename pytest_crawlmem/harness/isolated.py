"""Isolated crawls (``crawl(..., isolate=True)``): the crawl runs in a fresh process.

The parent (pytest process) starts ``python -m pytest_crawlmem.harness.isolated SPEC RESULT``,
watches the child's RSS and clock, and kills it when it ignores ``kill_at`` or
``timeout`` past a grace period. The child measures itself exactly as an in-process
crawl does, streaming ``samples.jsonl``; a child that was killed or crashed still yields
a result built from that stream. The spec and result files are private to the two
processes (pickled: spider classes and settings travel by reference), never reports.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from pytest_crawlmem.core import stops, verdicts
from pytest_crawlmem.core.assemble import assemble, judge, stream_facts
from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.models import Checkpoint, CrawlResult, Growth, Sample
from pytest_crawlmem.harness.interrupts import INTERRUPT_SIGNALS, graceful_interrupts, interrupted_message
from pytest_crawlmem.measure.extension import interrupt_running_crawls
from pytest_crawlmem.measure.runner import CrawlOptions, run_crawl
from pytest_crawlmem.probes.danger import load_danger
from pytest_crawlmem.reports.jsonl import read_samples_jsonl, read_stop

KILL_GRACE_SECONDS = 2.0
_POLL_SECONDS = 0.05
_CHILDREN: set[subprocess.Popen[bytes]] = set()  # isolated crawls running now (what Ctrl-C is forwarded to)


@dataclass(frozen=True)
class IsolatedSpec:
    """Everything the child needs to run the crawl."""

    spider_module: str
    spider_qualname: str
    start_urls: list[str] | None
    settings: Mapping[str, Any] | None
    spider_kwargs: Mapping[str, Any]
    options: CrawlOptions


def spec_for(
    spider_cls: type,
    *,
    start_urls: list[str] | None,
    settings: Mapping[str, Any] | None,
    spider_kwargs: Mapping[str, Any],
    options: CrawlOptions,
) -> IsolatedSpec:
    """Describe the crawl for the child; a spider class the child cannot import is an error now."""
    qualname = spider_cls.__qualname__
    if "<locals>" in qualname or spider_cls.__module__ == "__main__":
        raise ValueError(
            f"isolate=True needs a spider class importable by name; {spider_cls.__module__}.{qualname}"
            " is defined inside a function or in __main__: move it to module level"
        )
    return IsolatedSpec(spider_cls.__module__, qualname, start_urls, settings, dict(spider_kwargs), options)


def run_isolated(spec: IsolatedSpec, *, kill_grace_seconds: float = KILL_GRACE_SECONDS) -> CrawlResult:
    """Run the crawl in a child process and return its result (pytest process)."""
    with tempfile.TemporaryDirectory(prefix="crawlmem-") as tmp:
        child = launch_isolated(spec, Path(tmp))
        try:
            while check_child(child, kill_grace_seconds):
                time.sleep(_POLL_SECONDS)
        finally:
            stderr = stop_child(child)
        return child_result(child, stderr)


@dataclass
class IsolatedChild:
    """An isolated crawl running in a child process, as the parent sees it (pytest process)."""

    spec: IsolatedSpec
    process: subprocess.Popen[bytes]
    result_path: Path
    started: float
    killed: str = ""  # why the parent killed it ('' if it did not)
    killed_reason: str = ""  # the stops name of that ('' if it did not)
    over_since: float | None = None


def launch_isolated(spec: IsolatedSpec, directory: Path) -> IsolatedChild:
    """Start the child crawl; its spec and result files live in ``directory`` (the caller removes it)."""
    spec_path, result_path = directory / "spec.pickle", directory / "result.pickle"
    spec_path.write_bytes(pickle.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))}
    process = subprocess.Popen(  # its own session: Ctrl-C reaches the parent, which forwards it once
        [sys.executable, "-m", "pytest_crawlmem.harness.isolated", str(spec_path), str(result_path)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    _CHILDREN.add(process)
    return IsolatedChild(spec, process, result_path, time.monotonic())


def stop_child(child: IsolatedChild) -> bytes:
    """Make sure the child is gone (kill it if it still runs); return its stderr."""
    _CHILDREN.discard(child.process)
    if child.process.poll() is None:
        child.process.kill()
    _, stderr = child.process.communicate()
    return stderr


def child_result(child: IsolatedChild, stderr: bytes, why: str = "") -> CrawlResult:
    """The child's result: the one it wrote, else one built from what it streamed before it died (``why``)."""
    if child.result_path.exists() and child.process.returncode == 0 and not child.killed:
        result: CrawlResult = pickle.loads(child.result_path.read_bytes())
        return result
    why = child.killed or why or f"the isolated crawl process exited with code {child.process.returncode}"
    tail = stderr.decode(errors="replace").strip().splitlines()[-15:]
    return result_from_stream(child.spec, why, time.monotonic() - child.started, tuple(tail), child.killed_reason)


def interrupt_children(signum: int = signal.SIGINT) -> None:
    """Forward a SIGINT or SIGTERM to every isolated crawl running now: each closes early and reports (signal-handler safe)."""
    for child in list(_CHILDREN):
        with contextlib.suppress(OSError):
            child.send_signal(signum)


def check_child(child: IsolatedChild, grace: float) -> bool:
    """Whether the child still runs; kill it (saying why in ``child.killed``) when it stays over kill_at or past timeout."""
    if child.process.poll() is not None:
        return False
    options, now = child.spec.options, time.monotonic()
    try:
        rss = psutil.Process(child.process.pid).memory_info().rss
    except psutil.Error:
        rss = 0
    if stops.over_kill_at(rss, options.kill_at_bytes):
        child.over_since = child.over_since or now
        if now - child.over_since > grace:
            child.process.kill()
            child.killed, child.killed_reason = stops.killed_at_kill_at_message(rss, grace), stops.KILL_AT
            return False
    if options.timeout_seconds and now - child.started > options.timeout_seconds + grace:
        child.process.kill()
        child.killed = stops.killed_at_timeout_message(options.timeout_seconds, grace)
        child.killed_reason = stops.TIMEOUT
        return False
    return True


def result_from_stream(
    spec: IsolatedSpec, why: str, duration: float, stderr_tail: tuple[str, ...], reason: str = ""
) -> CrawlResult:
    """A result from what the child streamed before it died: samples and checkpoints, no exact peak.

    ``reason`` is why the parent killed it (a :mod:`~pytest_crawlmem.core.stops` name), else the stop the child
    streamed, else :data:`~pytest_crawlmem.core.stops.KILLED`.
    """
    report_dir = spec.options.report_dir
    stream_path = report_dir / "samples.jsonl" if report_dir else None  # absent when the child died before the crawl opened
    stream = read_samples_jsonl(stream_path) if stream_path is not None and stream_path.exists() else None
    samples = tuple(Sample.from_json(s) for s in stream.samples) if stream else ()
    checkpoints = [Checkpoint.from_json(c) for c in stream.checkpoints] if stream else []
    growth = judge(checkpoints, samples, leak_per_response=spec.options.leak_per_response,
                   expected_growth=spec.options.budgets.expected_growth or ()) if checkpoints else (
        Growth(verdicts.INCONCLUSIVE, why))
    streamed = read_stop(stream_path) if stream is not None and stream_path is not None else None
    if reason and streamed and streamed.get("message") and streamed["message"] not in why:
        why = f"{why}; it had been stopping since: {streamed['message']}"  # the cause, not only the kill
    reason = reason or (streamed or {}).get("reason") or stops.KILLED
    facts = stream_facts(
        spec.spider_qualname, samples, checkpoints, finish_reason=reason, interval_seconds=spec.options.interval_seconds,
        duration_seconds=duration, stopped_because=why, report_dir=report_dir,
        errors=(why, *(stream.problems if stream else ()), *stderr_tail),
    )
    return assemble(facts, samples, checkpoints, growth, danger=load_danger(report_dir))  # danger.json: written by the child


def _reactor_wait(deferred: Any) -> Any:
    """Run the reactor until ``deferred`` fires (the child owns its reactor)."""
    from twisted.internet import reactor as installed

    reactor: Any = installed
    outcome: list[Any] = []

    def done(value: Any) -> None:
        outcome.append(value)
        if reactor.running:  # a crawl that fails at once fires before the reactor runs: its error, not ReactorNotRunning
            reactor.stop()

    deferred.addBoth(done)
    if not outcome:
        reactor.run(installSignalHandlers=False)  # SIGINT and SIGTERM are ours: they close the crawl
    if outcome and hasattr(outcome[0], "raiseException"):
        outcome[0].raiseException()
    return outcome[0] if outcome else None


def main(argv: list[str]) -> int:
    """Child process: run the crawl described by the spec file, write its result."""
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    spec: IsolatedSpec = pickle.loads(Path(argv[0]).read_bytes())
    module = __import__(spec.spider_module, fromlist=["_"])
    spider_cls: Any = module
    for part in spec.spider_qualname.split("."):
        spider_cls = getattr(spider_cls, part)
    # A cluster worker closes on SIGTERM as `scrapy crawl` does (reason shutdown, its own handler): Ctrl-C only here.
    worker = name_of("cluster_worker") in (spec.settings or {})
    signals = (signal.SIGINT,) if worker else INTERRUPT_SIGNALS
    with graceful_interrupts(lambda signum: interrupt_running_crawls(interrupted_message(signum)), signals):
        result = run_crawl(
            spider_cls, wait=_reactor_wait, start_urls=spec.start_urls, settings=spec.settings,
            spider_kwargs=spec.spider_kwargs, options=spec.options,
        )
    tmp = Path(argv[1] + ".tmp")
    tmp.write_bytes(pickle.dumps(result))
    os.replace(tmp, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
