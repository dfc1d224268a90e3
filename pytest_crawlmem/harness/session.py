"""Per-session state of the plugin: settings, crawl records, budget verdicts, terminal summary."""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.budgets import Budgets, Violation
from pytest_crawlmem.core.interpreter import other_interpreter
from pytest_crawlmem.core.leakset import leaks_of_runs
from pytest_crawlmem.core.models import CrawlResult
from pytest_crawlmem.core.settings import PluginSettings
from pytest_crawlmem.core.sites import named_line
from pytest_crawlmem.core.sweep import SweepResult
from pytest_crawlmem.core.tracebuild import leak_lines
from pytest_crawlmem.core.units import format_size
from pytest_crawlmem.core.warmup import warmup_cell
from pytest_crawlmem.harness import baseline as bl
from pytest_crawlmem.reports.github_summary import append_step_summary
from pytest_crawlmem.reports.report import environment

#: Why a test's crawl_memory marker is wrong, set at collection; the test fails at setup with it, its neighbours run.
MARKER_ERROR_KEY = pytest.StashKey[str]()


class CrawlMemWarning(UserWarning):
    """A memory finding that the test's budgets ask to report, not to fail on (``leak="warn"``)."""


@dataclass
class CrawlRecord:
    """One crawl of a test: its result, budgets and violations."""

    test_id: str
    result: CrawlResult
    budgets: Budgets | None
    violations: list[Violation]
    outcome: str = "passed"
    variant: str | None = None  # the crawl_sweep variant this crawl ran, if any
    sweep: int = 0  # which crawl_sweep call of the test (from 1), for variants


@dataclass(frozen=True)
class SummaryRow:
    """One crawl's line in the terminal summary: plain figures, so xdist workers can send it as JSON."""

    test_id: str
    responses: int
    peak_rss: int
    per_response_bytes: float | None
    verdict: str
    outcome: str
    rss_growth: int
    max_scheduled: int
    max_inflight: int
    duration_seconds: float
    variant: str = ""
    crawl: str = ""  # "2: spider" for the second of several crawls of a test
    amplification_p95: float | None = None  # parse amplification (issue 19), shown with -v
    amplification_max: float | None = None
    detectable_per_response_bytes: float | None = None  # the smallest leak the crawl would have caught (95%), with -v
    where: str = ""  # the line a leak verdict names first (the one storing into its holder), shown with -v
    fingerprint: str = ""  # a leak verdict's fingerprint (core/fingerprint.py), shown with -v
    rss_warmup: str = ""  # how much of the RSS growth came in the warm-up ("all in warm-up"), shown with -v
    known_leak: str = ""  # a known library leak's line (core/libleaks.py), under the table

    @classmethod
    def of(cls, record: CrawlRecord, crawl: str = "") -> SummaryRow:
        """Summarize a crawl record; ``crawl`` tells several crawls of one test apart."""
        result = record.result
        amp = result.parse_amplification
        return cls(
            record.test_id, result.responses, result.peak_rss, result.growth.per_response_bytes, result.verdict,
            record.outcome, result.rss_growth, result.max_scheduled, result.max_inflight, result.duration_seconds,
            record.variant or "", crawl, amp.p95_ratio if amp else None, amp.max_ratio if amp else None,
            result.growth.detectable_per_response_bytes,
            named_line(result.top_growth, result.holders) if result.verdict == verdicts.RETAINED_OBJECTS else "",
            result.growth.fingerprint, warmup_cell(result),
            result.growth.known_leak.describe() if result.growth.known_leak is not None else "",
        )

    def cells(self, verbose: bool) -> list[str]:
        """The row's cells, formatted for people."""
        per = self.per_response_bytes
        label = self.variant or (f"crawl {self.crawl}" if self.crawl else "")
        test = f"{self.test_id} ({label})" if label else self.test_id
        cells = [test, f"{self.responses:,}", format_size(self.peak_rss),
                 "-" if per is None else format_size(per), self.verdict, self.outcome]
        if verbose:
            amp = "-" if self.amplification_max is None else f"{self.amplification_p95 or 0:.1f}x/{self.amplification_max:.1f}x"
            caught = self.detectable_per_response_bytes
            growth = format_size(self.rss_growth) + (f" ({self.rss_warmup})" if self.rss_warmup else "")
            cells[4:4] = [growth, f"{self.max_scheduled:,}", f"{self.max_inflight:,}",
                          f"{self.duration_seconds:.1f}s", amp, "-" if caught is None else f">= {format_size(caught)}"]
            cells += [self.fingerprint or "-", self.where or "-"]
        return cells


@dataclass
class CrawlMemSession:
    """Everything the plugin keeps for one pytest session (summary rows only: results are not kept alive)."""

    settings: PluginSettings
    rows: list[SummaryRow] = field(default_factory=list)
    sweeps: list[dict[str, Any]] = field(default_factory=list)  # sweep.json of each crawl_sweep (JSON-ready)
    baseline: bl.Baseline | None = None  # what --crawlmem-compare compares to
    save_path: Path | None = None  # where --crawlmem-save appends
    unsaved: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # runs to append at session end
    notes: list[str] = field(default_factory=list)  # baseline notes for the terminal summary
    commit: dict[str, Any] = field(default_factory=dict)
    known: frozenset[str] | None = None  # the compared baseline's leak fingerprints, read once (known_leaks)

    def open_baselines(self, rootdir: Path) -> list[str]:
        """At configure: load the --crawlmem-compare baseline, check the --crawlmem-save name; return warnings.

        Raises :class:`baseline.BaselineError` (a usage error) for a missing or unusable baseline.
        """
        settings, here = self.settings, bl.machine_fingerprint()
        if settings.save_name:
            self.save_path = bl.baseline_path(settings.report_dir, settings.save_name, here, directory=settings.baselines)
            self.commit = bl.commit_info(rootdir)
        if not settings.compare_name:
            return []
        self.baseline, differences = bl.find_baseline(settings.report_dir, settings.compare_name, here,
                                                      directory=settings.baselines)
        if not differences:
            return []
        return [f"baseline {self.baseline.path} was saved on a different machine ({'; '.join(differences)}):"
                " its memory figures may not be comparable"]

    def compare(self, item: pytest.Item, records: Sequence[CrawlRecord]) -> list[str]:
        """Compare each crawl to the baseline: return regression sentences, warn for improvements, note missing tests."""
        if self.baseline is None:
            return []
        budgets = item.stash.get(BUDGETS_KEY, None)
        tolerances = bl.merge_tolerances(self.settings.compare_fail, budgets.compare_fail if budgets else None)
        failures = []
        for index, record in enumerate(records, 1):
            key = bl.run_key(item.nodeid, index)
            failures += self.new_leak(key, record)
            runs = self.baseline.runs.get(key)
            if not runs:
                self.notes.append(f"{key}: not in baseline {self.baseline.path}, not compared")
                continue
            figures = bl.run_figures(record.result)
            other = other_interpreter(runs, figures["interpreter"])
            if other is not None:  # figures of another interpreter build: told, never judged
                self.notes.append(f"{key}: not compared with baseline {self.baseline.path}: {other}")
                warnings.warn(CrawlMemWarning(f"{key}: {other}"), stacklevel=1)
                continue
            caveats = baseline_caveats(figures, runs, tolerances, self.baseline.path)
            self.notes += [f"{key}: {caveat}" for caveat in caveats]
            kept = bl.within_tolerance(figures, runs, tolerances)
            if kept is not None:
                self.notes.append(f"{key}: {kept} of baseline {self.baseline.path}")
            for finding in bl.compare_run(figures, runs, tolerances):
                if finding.regressed and "regressions" in self.settings.fail_on:
                    failures.append(finding.message() + "".join(f"; {caveat}" for caveat in caveats))
                elif finding.regressed:  # --crawlmem-fail-on new-leaks: a figure's regression is told, not failed
                    warnings.warn(CrawlMemWarning(f"{key}: {finding.message()}"), stacklevel=1)
                    self.notes.append(f"{key}: {finding.message()} (not failed: --crawlmem-fail-on"
                                      f" {','.join(sorted(self.settings.fail_on))})")
                else:
                    warnings.warn(CrawlMemWarning(f"{key}: {finding.message()}"), stacklevel=1)
                    self.notes.append(f"{key}: {finding.message()}")
        return failures

    def known_leaks(self) -> frozenset[str]:
        """The leak fingerprints of every run of the compared baseline, in any test (empty without a baseline)."""
        if self.baseline is None:
            return frozenset()
        if self.known is None:
            self.known = frozenset(leak.fingerprint for leak in leaks_of_runs(self.baseline.runs))
        return self.known

    def new_leak(self, key: str, record: CrawlRecord) -> list[str]:
        """With ``--crawlmem-fail-on new-leaks``: the sentence failing a crawl whose leak fingerprint the baseline does
        not have; a note for one it has (nothing for a crawl without a leak)."""
        fingerprint = record.result.leak_fingerprint
        if "new-leaks" not in self.settings.fail_on or self.baseline is None or not fingerprint:
            return []
        result = record.result
        where = named_line(result.top_growth, result.holders)
        leak = f"{result.verdict} leak {fingerprint}" + (f" at {where}" if where else "")
        runs = sum(map(len, self.baseline.runs.values()))
        if result.growth.known_leak is not None:  # a leak of Scrapy or a library, not of the team's code: never new
            self.notes.append(f"{key}: {leak} is a {result.growth.known_leak.describe()}")
            return []
        if fingerprint in self.known_leaks():
            self.notes.append(f"{key}: known {leak}: in baseline {self.baseline.path}")
            return []
        older = "" if self.known_leaks() else (" (the baseline holds no leak fingerprint: if it was saved by an older"
                                               " pytest-crawlmem, save it again)")
        return [f"new {leak}: its fingerprint is in none of the {runs:,} runs of baseline {self.baseline.path}{older}"]

    def excused(self, record: CrawlRecord, violation: Violation) -> bool:
        """Whether a broken leak budget only warns: ``--crawlmem-fail-on new-leaks`` and a leak the baseline knows, or a
        known library leak."""
        fingerprint = record.result.leak_fingerprint
        return ("new-leaks" in self.settings.fail_on and violation.of_verdict and fingerprint is not None
                and (fingerprint in self.known_leaks() or record.result.growth.known_leak is not None))

    def report_dir_for(self, nodeid: str, index: int) -> Path:
        """Return the report dir of the ``index``-th crawl (from 1) of test ``nodeid``."""
        base = self.settings.report_dir / safe_dirname(nodeid)
        return base if index == 1 else base / f"crawl-{index}"

    def enforce(self, item: pytest.Item, records: Sequence[CrawlRecord]) -> None:
        """At the end of the test body: warn for ``leak="warn"``, fail the test for every broken budget.

        Runs inside the call phase, so ``xfail`` (strict or not) and the report see an
        ordinary test failure.
        """
        item.stash[ENFORCED_KEY] = True
        for violation in (v for r in records for v in r.violations if not v.fails or self.excused(r, v)):
            warnings.warn(CrawlMemWarning(f"{item.nodeid}: {violation.message}"), stacklevel=1)
        failing = [v for r in records if r.variant is None for v in r.violations if v.fails and not self.excused(r, v)]
        sweeps = sweep_failures(item.nodeid, records)
        regressions = self.compare(item, records)
        if failing or sweeps or regressions:
            lines = [f"crawl_memory budget broken: {v.message}" for v in failing]
            lines += [f"crawl_memory budget broken: {message}" for message in sweeps]
            lines += [f"crawl_memory baseline: {message}" for message in regressions]
            lines += result_notes(records)
            lines += [f"crawl_memory verdict: {r.result.verdict}: {r.result.growth.reason}" for r in records
                      if r.variant is None and r.result.growth.reason
                      and not any(v.of_verdict for v in r.violations)]
            lines += [line if line.startswith(" ") else f"crawl_memory {line}"
                      for r in records if r.variant is None for line in leak_lines(r.result)]
            dirs = sorted({str(r.result.report_dir) for r in records if r.result.report_dir})
            lines += [f"report: {d}" for d in dirs]
            pytest.fail("\n".join(lines), pytrace=False)

    def finish_test(self, item: pytest.Item, report: pytest.TestReport, records: Sequence[CrawlRecord]) -> None:
        """Record each crawl's outcome for the summary and its figures for --junitxml."""
        for index, record in enumerate(records, 1):
            broken = any(v.fails and not self.excused(record, v) for v in record.violations)
            record.outcome = ("xfailed" if hasattr(report, "wasxfail") else "over budget" if broken and record.variant
                              else "failed" if broken else report.outcome)
            unjudged = record.result.verdict == verdicts.INCONCLUSIVE
            if not broken and any(v.of_verdict for v in record.violations) and unjudged:
                record.outcome += ", leak not judged"  # leak="fail" that could not judge: never a silent pass
            several = len(records) > 1 and record.variant is None
            self.rows.append(SummaryRow.of(record, f"{index}: {record.result.spider}" if several else ""))
            if self.save_path is not None:
                self.unsaved.setdefault(bl.run_key(item.nodeid, index), []).append(
                    bl.run_figures(record.result, outcome=record.outcome, commit=self.commit.get("id"))
                )
        if report.failed and not item.stash.get(ENFORCED_KEY, False):
            text = unreported_budgets(records)  # the test's own code failed before the budgets were checked
            if text:
                report.sections.append(("crawl_memory: budgets and reports of this test's crawls", text))
        properties = junit_properties(records)
        item.user_properties.extend(properties)  # --junitxml reads them from the teardown report, made from the item
        report.user_properties.extend(properties)

    def add_worker_rows(self, rows: Sequence[dict[str, Any]]) -> None:
        """Merge the rows an xdist worker sent back."""
        self.rows.extend(SummaryRow(**row) for row in rows)

    def save_baseline(self) -> None:
        """At session end, append this process's runs to the --crawlmem-save baseline under its lock (xdist: each worker)."""
        if self.save_path is None or not self.unsaved:
            return  # the xdist controller ran no crawl: it writes nothing
        header = bl.new_header(self.settings.save_name or "", fingerprint=bl.machine_fingerprint(),
                               environment=environment(), commit=self.commit)
        try:
            bl.save_runs(self.save_path, self.unsaved, header)
        except (bl.BaselineError, OSError) as exc:
            self.notes.append(f"baseline not saved: {exc}")
        else:
            self.notes.append(appended_note(sum(map(len, self.unsaved.values())), self.save_path))
        self.unsaved = {}

    def add_worker_sweeps(self, sweeps: Sequence[dict[str, Any]]) -> None:
        """Merge the sweep tables an xdist worker sent back."""
        self.sweeps.extend(sweeps)

    def worker_rows(self) -> list[dict[str, Any]]:
        """This worker's rows, as JSON-ready dicts for the xdist controller."""
        return [asdict(row) for row in self.rows]

    def summarize(self, terminalreporter: Any, *, verbose: bool) -> None:
        """Write the crawl table to the terminal."""
        if not self.rows and not self.notes:
            return
        terminalreporter.write_sep("=", "crawl memory")
        header = table_header(verbose)
        rows = [header] + [r.cells(verbose) for r in sorted(self.rows, key=lambda r: (r.test_id, r.crawl))]
        self.write_step_summary(terminalreporter)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            terminalreporter.write_line("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        terminalreporter.write_line(f"reports: {self.settings.report_dir}")
        for known in sorted((r for r in self.rows if r.known_leak), key=lambda r: (r.test_id, r.crawl)):
            crawl = f" (crawl {known.crawl})" if known.crawl else ""
            terminalreporter.write_line(f"{known.test_id}{crawl}: {known.known_leak}")
        for note in merge_notes(self.notes):
            terminalreporter.write_line(note)
        self.summarize_sweeps(terminalreporter)

    def write_step_summary(self, terminalreporter: Any) -> None:
        """With ``$GITHUB_STEP_SUMMARY`` set (GitHub Actions): append the crawl table (every column of ``-v``) and every
        failed test's text as Markdown (reports/github_summary.py)."""
        target = os.environ.get("GITHUB_STEP_SUMMARY")
        if not target or not self.rows or hasattr(terminalreporter.config, "workerinput"):
            return  # an xdist worker's rows go to the controller, which writes them all once
        rows = [r.cells(True) for r in sorted(self.rows, key=lambda r: (r.test_id, r.crawl))]
        failed = [*terminalreporter.stats.get("failed", ()), *terminalreporter.stats.get("error", ())]
        failures = [(report.nodeid, report.longreprtext) for report in failed if getattr(report, "longreprtext", "")]
        try:
            append_step_summary(Path(target), table_header(True), rows, failures, notes=merge_notes(self.notes),
                                report_dir=str(self.settings.report_dir))
        except OSError as exc:
            terminalreporter.write_line(f"crawl memory: GITHUB_STEP_SUMMARY {target} not written: {exc}")

    def summarize_sweeps(self, terminalreporter: Any) -> None:
        """Write one table per crawl_sweep, the test's last ``best()`` pick (else the default pick) marked with ``*``."""
        for data in sorted(self.sweeps, key=lambda d: str(d["test"])):
            sweep = SweepResult.from_json(data)
            mode = "isolated" if sweep.isolated else "in-process"
            terminalreporter.write_sep("-", f"crawl sweep: {sweep.test_id} ({len(sweep)} variants, {mode})")
            for line in sweep.table(mark=data.get("best")).splitlines():
                terminalreporter.write_line(line)
            best, rule = data.get("best"), data.get("best_rule", "")
            terminalreporter.write_line(f"* {best}: {rule}" if best else f"no variant qualified for {rule}")


def table_header(verbose: bool) -> list[str]:
    """The crawl table's header (``-v`` adds the figures, the leak's fingerprint and where it is kept)."""
    header = ["test", "responses", "peak RSS", "growth/resp", "verdict", "outcome"]
    if verbose:
        header[4:4] = ["RSS growth", "max sched", "max inflight", "duration", "parse amp p95/max", "leak caught (95%)"]
        header += ["fingerprint", "where"]
    return header


_APPENDED = re.compile(r"^baseline: (\d+) runs? appended to (.+)$")


def appended_note(count: int, path: Path) -> str:
    """``baseline: 2 runs appended to PATH``: one process's saved runs (xdist workers each write one)."""
    return f"baseline: {count} run{'s' if count != 1 else ''} appended to {path}"


def merge_notes(notes: Sequence[str]) -> list[str]:
    """Notes for the summary, each once, with the runs that several xdist workers appended to one file added up."""
    appended: dict[str, int] = {}
    others = set()
    for note in notes:
        match = _APPENDED.match(note)
        if match:
            appended[match[2]] = appended.get(match[2], 0) + int(match[1])
        else:
            others.add(note)
    return sorted(others) + [appended_note(count, Path(path)) for path, count in sorted(appended.items())]


def baseline_caveats(figures: dict[str, Any], runs: Sequence[dict[str, Any]], tolerances: dict[str, bl.Tolerance],
                     path: Path) -> list[str]:
    """What makes one crawl's comparison weaker: a baseline saved without the start RSS, isolation or a place among the
    process's crawls that differs from the baseline's."""
    caveats = []
    if bl.without_start(runs, tolerances):
        caveats.append(f"baseline {path} has no start RSS (saved by an older pytest-crawlmem): peak_rss compared as the"
                       " absolute peak, which earlier tests in the process move; save the baseline again to compare the"
                       " peak above the crawl's start")
    differs = bl.isolation_differs(figures, runs)
    if differs is not None:
        caveats.append(f"{differs}: their memory figures start from different processes")
    first = bl.first_crawl_differs(figures, runs)
    if first is not None and "rss_growth" in tolerances:
        caveats.append(f"{first}: what the project loads once and keeps counts in the rss_growth of a process's first"
                       " crawl only; save and compare with --crawlmem-isolate")
    return caveats


def unreported_budgets(records: Sequence[CrawlRecord]) -> str:
    """Lines for a test that failed on its own: the budgets its crawls broke and where their reports are."""
    lines = [f"crawl_memory budget broken: {v.message}" for r in records for v in r.violations if v.fails]
    lines += [f"crawl_memory warning: {v.message}" for r in records for v in r.violations if not v.fails]
    if not records:
        return ""
    if not lines:
        lines.append(f"every crawl_memory budget was kept ({len(records)} crawl{'s' if len(records) != 1 else ''})")
    dirs = sorted({str(r.result.report_dir) for r in records if r.result.report_dir})
    return "\n".join(lines + result_notes(records) + [f"report: {d}" for d in dirs])


def result_notes(records: Sequence[CrawlRecord]) -> list[str]:
    """``crawl_memory note: ...`` for what earlier crawls in the process left that changed these (``result.notes``)."""
    return [f"crawl_memory note: {note}" for r in records for note in r.result.notes]


def junit_properties(records: Sequence[CrawlRecord]) -> list[tuple[str, object]]:
    """Per-crawl figures for ``--junitxml``: ``crawlmem_*`` for the first crawl, ``crawlmem_*_2`` for the second, ..."""
    properties: list[tuple[str, object]] = []
    for index, record in enumerate(records, 1):
        result = record.result
        suffix = "" if index == 1 else f"_{index}"
        per = result.growth.per_response_bytes
        values: dict[str, object] = {
            "peak_rss": result.peak_rss,
            "rss_growth": result.rss_growth,
            "responses": result.responses,
            "verdict": result.verdict,
            "growth_per_response": "" if per is None or not math.isfinite(per) else round(per, 1),
            "report_dir": "" if result.report_dir is None else str(result.report_dir),
            "leak_fingerprint": result.growth.fingerprint,  # '' when the verdict is not a leak
        }
        properties += [(f"crawlmem_{name}{suffix}", value) for name, value in values.items()]
    return properties


def sweep_failures(nodeid: str, records: Sequence[CrawlRecord]) -> list[str]:
    """Warn for each budget a sweep variant broke; return a sentence for each sweep in which no variant kept them."""
    sweeps: dict[int, list[CrawlRecord]] = {}
    for record in records:
        if record.variant is not None:
            sweeps.setdefault(record.sweep, []).append(record)
    failures = []
    for variants in sweeps.values():
        broken = {r.variant: [v.message for v in r.violations if v.fails] for r in variants}
        for variant, messages in broken.items():
            for message in messages:
                warnings.warn(CrawlMemWarning(f"{nodeid} variant {variant}: {message}"), stacklevel=1)
        if all(broken.values()):
            failures.append("no variant of the sweep kept the budgets: "
                            + "; ".join(f"{variant}: {', '.join(messages)}" for variant, messages in broken.items()))
    return failures


def safe_dirname(nodeid: str) -> str:
    """Return a directory name for a test id: ``tests/test_a.py::test_b[x]`` -> ``tests_test_a.py__test_b_x_``."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", nodeid.replace("::", "__").replace("/", "_"))
    return name[:150] or "test"


SESSION_KEY = pytest.StashKey[CrawlMemSession]()
BUDGETS_KEY = pytest.StashKey[Budgets]()
RECORDS_KEY = pytest.StashKey[list[CrawlRecord]]()
ENFORCED_KEY = pytest.StashKey[bool]()  # set once the budgets were checked (the test body did not raise)
