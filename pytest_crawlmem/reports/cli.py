"""``crawlmem`` / ``python -m pytest_crawlmem``: render report.html, compare two crawls (any process, no Scrapy)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pytest_crawlmem.core import interpreter
from pytest_crawlmem.core.defaults import name_of
from pytest_crawlmem.core.models import GrowthSite
from pytest_crawlmem.core.tracebuild import leak_lines
from pytest_crawlmem.core.units import format_size
from pytest_crawlmem.reports.document import ReportDocument
from pytest_crawlmem.reports.jsonl import is_number
from pytest_crawlmem.reports.leakdiff import new_leaks_command
from pytest_crawlmem.reports.loading import LoadedReport, LoadError, load_report, write_html
from pytest_crawlmem.reports.record import record_command

EXIT_OK = 0
EXIT_BAD_INPUT = 2
SITES = 10
LOCATION_WIDTH = 60


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawlmem", description="Reports of pytest-crawlmem crawls; recordings to replay.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{report,diff,record}")
    report = commands.add_parser(
        "report", help="render report.html from a report dir, a report.json or a bare samples.jsonl",
        description="Render report.html from a report dir (report.json + samples.jsonl), a report.json, or a bare"
                    f" samples.jsonl (a production crawl's {name_of('jsonl')}); written next to it unless -o is given.",
    )
    report.add_argument("path", type=Path, help="report dir, report.json or samples.jsonl")
    report.add_argument("-o", "--output", type=Path, help="where to write the HTML (a file, or a directory for report.html)")
    diff = commands.add_parser(
        "diff", help="compare two crawls' figures and top growth sites, or list the leaks new in a treatment",
        description="Compare two crawls (report dirs, report.json or samples.jsonl files). With --new-leaks: list the"
                    " leaks of TREATMENT whose fingerprints CONTROL does not have, exit 1 when there is one (each a"
                    " report dir or a folder of them, a report.json, a baseline file or a baseline name).")
    diff.add_argument("a", metavar="A|CONTROL", help="the first crawl (the baseline); with --new-leaks, the control")
    diff.add_argument("b", metavar="B|TREATMENT", help="the second crawl; with --new-leaks, the treatment")
    diff.add_argument("--new-leaks", action="store_true",
                      help="list the leaks whose fingerprints are new in TREATMENT; exit 1 when there are any, 0 if not")
    diff.add_argument("--baseline-dir", type=Path, default=Path(".crawlmem") / "baselines",
                      help="where baseline names are looked up (default: .crawlmem/baselines)")
    record = commands.add_parser(
        "record", help="record a spider's crawl (run in its Scrapy project) for crawl(replay=...)",
        description="Run `scrapy crawl SPIDER` with the HTTP cache on, into OUTPUT; print its size per page.",
    )
    record.add_argument("spider", help="the spider's name, as `scrapy crawl` takes it")
    record.add_argument("-o", "--output", type=Path, required=True, help="a new directory for the recording")
    record.add_argument("--pages", type=int, help="stop after this many responses (CLOSESPIDER_PAGECOUNT)")
    record.add_argument("--gzip", action="store_true", help="gzip the cache files (HTTPCACHE_GZIP)")
    record.add_argument("-s", "--set", action="append", default=[], metavar="NAME=VALUE", help="a Scrapy setting, as -s")
    record.add_argument("--stand-in", action="append", default=[], metavar="ORIGIN=TARGET",
                        help="fetch ORIGIN's URLs (https://www.shop.example) from a local copy of the site, a server"
                             " (http://127.0.0.1:8000) or a directory, recorded under the original URLs")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (2 for a path that cannot be used; ``diff --new-leaks``: 1 when the
    treatment has a new leak)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "report":
            return report_command(args.path, args.output)
        if args.command == "record":
            return record_command(args.spider, args.output, pages=args.pages, gzip=args.gzip, settings=args.set,
                                  stand_in=args.stand_in)
        if args.new_leaks:
            return new_leaks_command(args.a, args.b, baseline_dir=args.baseline_dir)
        return diff_command(Path(args.a), Path(args.b))
    except LoadError as exc:
        print(f"crawlmem: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def report_command(path: Path, output: Path | None) -> int:
    """Render report.html for ``path``; print where it went and any unreadable lines."""
    report = load_report(path)
    out = output if output is not None else report.directory / "report.html"
    if out.is_dir():
        out = out / "report.html"
    for problem in report.stream.problems:
        print(f"crawlmem: warning: {path}: {problem}", file=sys.stderr)
    try:
        write_html(report, out)
    except OSError as exc:
        raise LoadError(f"{out}: cannot be written ({exc.strerror or exc})") from exc
    print(f"wrote {out}")
    result = report.result
    lines = leak_lines(result)
    if lines:  # a leak verdict: its sentence's head, then its trace and whether it is a known library leak
        print(f"{result.verdict}: {result.growth.reason.split('; held by ')[0].split('. Fix: ')[0]}")
        print("\n".join(lines))
    return EXIT_OK


# -- diff ---------------------------------------------------------------------------------


def _size_change(a: float, b: float) -> str:
    change = b - a
    if change == 0:
        return "0"
    percent = f" ({change / a:+.1%})" if a > 0 and b >= 0 else ""
    return ("+" if change > 0 else "") + format_size(change) + percent


def _count_change(a: float, b: float) -> str:
    return "0" if a == b else f"{b - a:+,.0f}"


def _seconds(value: float) -> str:
    return f"{value:,.1f} s"


Figure = Callable[[ReportDocument], object]
Row = tuple[str, Figure, Callable[[float], str], Callable[[float, float], str]]


def _of(name: str) -> Figure:
    """The result's figure ``name`` (``None`` when the report does not hold it)."""
    return lambda doc: doc.figure(name)


ROWS: tuple[Row, ...] = (
    ("responses", _of("responses"), lambda v: f"{v:,.0f}", _count_change),
    ("items", _of("items_scraped"), lambda v: f"{v:,.0f}", _count_change),
    ("duration", _of("duration_seconds"), _seconds, lambda a, b: f"{b - a:+,.1f} s"),
    ("peak RSS", _of("peak_rss"), format_size, _size_change),
    ("start RSS", _of("start_rss"), format_size, _size_change),
    ("end RSS", _of("end_rss"), format_size, _size_change),
    ("RSS growth", _of("rss_growth"), format_size, _size_change),
    ("growth/response", lambda doc: doc.result.growth.per_response_bytes, format_size, _size_change),
    ("traced peak", _of("traced_peak"), format_size, _size_change),
    ("max scheduled", _of("max_scheduled"), lambda v: f"{v:,.0f}", _count_change),
    ("max in flight", _of("max_inflight"), lambda v: f"{v:,.0f}", _count_change),
    ("max active size", _of("max_active_size"), format_size, _size_change),
)


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def figure_rows(a: ReportDocument, b: ReportDocument) -> list[list[str]]:
    """The figures of two reports side by side, with the change from ``a`` to ``b``."""
    rows = [["", "A", "B", "change"]]
    for label, figure, fmt, change in ROWS:
        va, vb = figure(a), figure(b)
        cells = [fmt(v) if is_number(v) else "-" for v in (va, vb)]
        delta = change(va, vb) if is_number(va) and is_number(vb) else ""
        rows.append([label, *cells, delta])
    verdicts = [doc.result.growth.verdict or "-" for doc in (a, b)]
    rows.append(["verdict", *verdicts, "same" if verdicts[0] == verdicts[1] else "changed"])
    return rows


def _short(location: str) -> str:
    return location if len(location) <= LOCATION_WIDTH else "..." + location[-(LOCATION_WIDTH - 3):]


def _site_cell(site: GrowthSite | None) -> str:
    if site is None:
        return "-"
    per = site.bytes_per_response
    per_text = f" ({per:,.0f} B/response)" if is_number(per) else ""
    grown = site.size_diff_bytes
    return ("+" + format_size(grown) if is_number(grown) else "?") + per_text


def site_rows(a: ReportDocument, b: ReportDocument) -> list[list[str]]:
    """The top growth sites of both reports, matched by location, biggest first."""
    sites = [{site.location: site for site in doc.result.top_growth} for doc in (a, b)]

    def biggest(location: str) -> float:
        return -max(float(s[location].size_diff_bytes) if is_number(s[location].size_diff_bytes) else 0.0
                    for s in sites if location in s)

    locations = sorted(set(sites[0]) | set(sites[1]), key=biggest)[:SITES]
    return [["top growth site", "A", "B"]] + [
        [_short(loc), _site_cell(sites[0].get(loc)), _site_cell(sites[1].get(loc))] for loc in locations
    ]


def _describe(report: LoadedReport) -> str:
    test = report.document.test or report.result.spider or "?"
    return f"{report.source} ({test})"


def _interpreter_of(doc: ReportDocument) -> dict[str, object]:
    """The report's interpreter facts (a report written before they were recorded: its version and implementation)."""
    recorded = doc.environment.get("interpreter")
    if isinstance(recorded, dict):
        return recorded
    return {key: doc.environment[name] for key, name in (("version", "python"), ("implementation", "implementation"))
            if name in doc.environment}


def interpreters_differ(a: ReportDocument, b: ReportDocument) -> str:
    """A line saying the two crawls ran on different interpreters ('' when they did not, or it is not known)."""
    first, second = _interpreter_of(a), _interpreter_of(b)
    differ = interpreter.differences(first, second)
    if not differ:
        return ""
    return (f"interpreters differ: A ran on {interpreter.describe(first)}, B on {interpreter.describe(second)}"
            f" ({'; '.join(differ).replace(' then,', ' in A,').replace(' here', ' in B')}): memory figures are"
            " comparable only within one interpreter build, so the changes below are not regressions")


def diff_command(path_a: Path, path_b: Path) -> int:
    """Print two crawls' figures, verdicts and top growth sites side by side."""
    a, b = load_report(path_a), load_report(path_b)
    lines = [f"A: {_describe(a)}", f"B: {_describe(b)}", ""]
    other = interpreters_differ(a.document, b.document)
    if other:
        lines += [other, ""]
    lines += _columns(figure_rows(a.document, b.document))
    sites = site_rows(a.document, b.document)
    lines.append("")
    lines += _columns(sites) if len(sites) > 1 else ["top growth sites: none in either crawl"]
    print("\n".join(lines))
    return EXIT_OK
