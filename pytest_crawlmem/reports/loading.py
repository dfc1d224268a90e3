"""Loads a crawl's report files back (a report dir, a report.json or a bare samples.jsonl) and renders report.html.

Runs in any process, without pytest or Scrapy: the CLI and the plugin's report writer share it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.assemble import assemble, judge, leak_evidence, stream_facts
from pytest_crawlmem.core.fingerprint import KeepingCode, code_at
from pytest_crawlmem.core.models import BrowserSummary, Checkpoint, CrawlResult, GrowthSite, Sample
from pytest_crawlmem.governor.policy import GOVERNOR_FILE
from pytest_crawlmem.reports.document import ReportDocument
from pytest_crawlmem.reports.html import render_html
from pytest_crawlmem.reports.jsonl import SamplesFile, read_finish, read_samples_jsonl

REPORT_FILES = ("report.json", "samples.jsonl", "tracemalloc-diff.txt", GOVERNOR_FILE)


class LoadError(Exception):
    """Report files that cannot be used at all; the message names the path."""


@dataclass(frozen=True)
class LoadedReport:
    """One crawl's report: report.json's document (or one built from the samples) and the samples.jsonl records."""

    source: Path
    document: ReportDocument
    stream: SamplesFile
    samples: tuple[Sample, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()

    @property
    def result(self) -> CrawlResult:
        """The crawl's result (its samples are those of samples.jsonl)."""
        return self.document.result

    @property
    def directory(self) -> Path:
        """The directory holding the report files."""
        return self.source if self.source.is_dir() else self.source.parent


def _loaded(source: Path, stream: SamplesFile, document_path: Path | None) -> LoadedReport:
    """The report of ``stream`` and, when given, of the report.json at ``document_path``."""
    samples = tuple(Sample.from_json(s) for s in stream.samples)
    checkpoints = tuple(Checkpoint.from_json(c) for c in stream.checkpoints)
    if document_path is None:
        stream_path = source / "samples.jsonl" if source.is_dir() else source
        document = _document_from_records(stream.header, samples, checkpoints, stream_path,
                                          finish=read_finish(stream_path) or {})
    else:
        document = ReportDocument.from_json(_read_document(document_path), samples=samples)
    return LoadedReport(source, document, stream, samples, checkpoints)


def _code_here(location: str) -> KeepingCode | None:
    """The code at ``file:line`` as the working directory has it (a bare samples.jsonl's leak fingerprint)."""

    def source_of(file: str) -> str | None:
        try:
            return Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    return code_at(location, source_of)


def _read_document(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise LoadError(f"{path}: not a readable report.json ({exc})") from exc
    if not isinstance(document, dict) or not isinstance(document.get("result"), dict):
        raise LoadError(f"{path}: not a crawlmem report.json (no 'result' object)")
    return document


def _read_stream(path: Path, *, required: bool) -> SamplesFile:
    if not path.exists() and not required:
        return SamplesFile({}, [], [], [f"{path.name} not found: the timeline is empty"])
    try:
        stream = read_samples_jsonl(path)
    except OSError as exc:
        raise LoadError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if required and not (stream.header or stream.samples or stream.checkpoints):
        first = f" ({stream.problems[0]})" if stream.problems else " (the file is empty)"
        raise LoadError(f"{path}: no crawlmem samples or checkpoints in this file{first}")
    return stream


def load_report(path: Path) -> LoadedReport:
    """Load a report dir, a ``report.json`` or a bare ``samples.jsonl``; raise :class:`LoadError` naming a bad path."""
    path = Path(path)
    if not path.exists():
        raise LoadError(f"{path}: no such file or directory")
    if path.is_dir():
        if (path / "report.json").is_file():
            return _loaded(path, _read_stream(path / "samples.jsonl", required=False), path / "report.json")
        if (path / "samples.jsonl").is_file():
            return _loaded(path, _read_stream(path / "samples.jsonl", required=True), None)
        raise LoadError(f"{path}: neither report.json nor samples.jsonl is in this directory")
    if path.suffix == ".json":
        return _loaded(path, _read_stream(path.parent / "samples.jsonl", required=False), path)
    return _loaded(path, _read_stream(path, required=True), None)


def document_from_samples(stream: SamplesFile, path: Path) -> ReportDocument:
    """The report computed from samples and checkpoints alone (a production crawl's stream): no budgets, no test;
    the finish reason, growth sites and browser figures come from the stream's ``finish`` record when it has one."""
    stream_path = path / "samples.jsonl" if path.is_dir() else path
    return _document_from_records(stream.header, tuple(Sample.from_json(s) for s in stream.samples),
                                  tuple(Checkpoint.from_json(c) for c in stream.checkpoints), path,
                                  finish=read_finish(stream_path) or {})


def _document_from_records(header: Mapping[str, Any], samples: Sequence[Sample], records: Sequence[Checkpoint],
                           path: Path, finish: Mapping[str, Any] | None = None) -> ReportDocument:
    """:func:`document_from_samples` of records already read."""
    finish = finish or {}
    checkpoints = sorted(records, key=lambda c: c.responses)
    interval = header.get("interval_seconds")
    seconds = float(interval) if isinstance(interval, (int, float)) else None
    spider = header.get("spider")
    sites = tuple(GrowthSite.from_json(site) for site in finish.get("growth_sites") or ())
    browser = BrowserSummary.from_json(finish["browser"]) if isinstance(finish.get("browser"), Mapping) else None
    facts = stream_facts(str(spider) if spider is not None else "", samples, checkpoints,
                         finish_reason=str(finish.get("reason") or "unknown"), interval_seconds=seconds or 0.0)
    growth = judge(checkpoints, samples, leak_per_response=None, evidence=leak_evidence(sites, ()))
    result = assemble(facts, samples, checkpoints, growth, top_growth=sites, browser=browser, read_code=_code_here)
    note = (
        f"Built from {path.name} alone (no report.json): no budgets or live objects after close"
        + ("" if sites else ", no allocation sites") + ";"
        " peak RSS is the highest sample, not the exact peak, and the end figures are those of the last checkpoint"
        " recorded (not the closing one if the crawl was killed)."
    )
    unmeasured = frozenset() if seconds is not None else {"backout_seconds"}  # samples do not say how long each stood for
    return ReportDocument(result, source=str(path), note=note, unmeasured=frozenset(unmeasured))


def write_html(report: LoadedReport, out: Path) -> Path:
    """Render ``report`` to ``out`` (written whole or not at all); links point at the report files beside it."""
    directory = report.directory
    files = [os.path.relpath(directory / name, out.parent) for name in REPORT_FILES if (directory / name).is_file()]
    if not report.source.is_dir() and report.source.suffix != ".json":
        files = [os.path.relpath(report.source, out.parent)]
    document = report.document
    if document.result.report_dir is None:  # files beside report.json (governor.json) are read from its directory
        document = replace(document, result=replace(document.result, report_dir=directory))
    text = render_html(document, report.samples, report.checkpoints,
                       header=report.stream.header, problems=report.stream.problems, files=files)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out)
    return out
