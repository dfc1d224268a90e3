"""Regenerates the reference tables in ``docs/*.md`` from the code (any process, no pytest, no Scrapy).

``python -m pytest_crawlmem.docgen [DOCS_DIR]`` rewrites every block between
``<!-- generated: NAME -->`` and ``<!-- end generated -->``; ``--check`` only reports the
files whose blocks differ from the code (exit 1), which is what the test suite runs. Blocks named
``figures-<benchmark>`` are the measured-figures tables, rendered from the benchmarks' latest-results files
(``benchmarks/results/*.json``, beside the docs directory; ``figures.py``), so a table left behind by a newer
benchmark run is stale too.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from pytest_crawlmem.core import verdicts
from pytest_crawlmem.core.budgets import SPECS
from pytest_crawlmem.core.defaults import settings_table
from pytest_crawlmem.core.models import CrawlResult, Growth, Peaks
from pytest_crawlmem.core.settings import OPTIONS
from pytest_crawlmem.reports.figures import FIGURES, FiguresError
from pytest_crawlmem.reports.report import report_document

COMMAND = "python -m pytest_crawlmem.docgen"
BLOCK = re.compile(r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


#: How the docs say a budget's value is written, by the kind of its row (``budgets.KINDS``); other kinds: "text".
KIND_WORDS = {"size": "size (`25 MB`, `1.5 GiB`, bytes)", "count": "count", "seconds": "seconds (`30`, `\"2 min\"`)",
              "declared": "holder: size per response (`{\"spider.seen_ids\": \"600 B\"}`; ini `spider.seen_ids=600 B, ...`)"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def budgets_table() -> str:
    """One row per budget of ``budgets.SPECS``: marker keyword, ini key, unit, what it limits."""
    rows = ["| budget (marker keyword) | ini default key | unit | limits |", "|---|---|---|---|"]
    option_keys = {o.dest for o in OPTIONS}
    for name, spec in SPECS.items():
        if not spec.enforced:
            continue
        ini = f"`crawlmem_{name}`" + (" (also an option)" if f"crawlmem_{name}" in option_keys else "")
        rows.append(f"| `{name}` | {ini} | {KIND_WORDS.get(spec.kind, 'text')} | {_cell(spec.help)} |")
    return "\n".join(rows)


def options_table() -> str:
    """One row per option of ``settings.OPTIONS``: flag, ini key, default, meaning."""
    rows = ["| option | ini key | default | meaning |", "|---|---|---|---|"]
    for option in OPTIONS:
        flag = f"`{option.flag}`" if option.switch else f"`{option.flag} {option.metavar}`"
        default = "off" if option.switch else ("-" if option.default is None else f"`{option.default}`")
        rows.append(f"| {_cell(flag)} | `{option.dest}` | {default} | {_cell(option.help)} |")
    return "\n".join(rows)


def report_keys() -> str:
    """The keys of report.json and of its ``result``, from what :func:`report.report_document` writes."""
    result = CrawlResult(spider="s", samples=(), start_rss=0, end_rss=0, peak_rss=0, traced_peak=None, responses=0,
                         items_scraped=0, duration_seconds=0.0, finish_reason="finished", peaks=Peaks(),
                         growth=Growth(verdicts.INCONCLUSIVE, ""))
    document = report_document(result, test_id="t", budgets=None, violations=[])
    top = ", ".join(f"`{key}`" for key in document)
    figures = ", ".join(f"`{key}`" for key in document["result"])
    nested = "".join(f"\n- `result.{name}`: " + ", ".join(f"`{key}`" for key in document["result"][name])
                     for name in ("peaks", "growth"))
    return f"- top level: {top}\n- `result`: {figures}{nested}"


GENERATORS: dict[str, Callable[[], str]] = {"budgets": budgets_table, "options": options_table, "report-keys": report_keys,
                                             "crawlmem-settings": lambda: settings_table().rstrip("\n")}


def results_of(docs: Path) -> Path:
    """Where the benchmarks' latest-results files of a docs directory are: ``../benchmarks/results``."""
    return docs.resolve().parent / "benchmarks" / "results"


def render(text: str, *, source: str = "text", results: Path | None = None) -> str:
    """``text`` with every generated block rewritten from the code (and the figures tables from ``results``); an
    unknown block name is a ValueError, a results file lacking a figure a :class:`figures.FiguresError`."""
    generators = dict(GENERATORS)
    if results is not None:
        generators.update({name: partial(function, results) for name, function in FIGURES.items()})

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in generators:
            known = ", ".join([*GENERATORS, *FIGURES])
            raise ValueError(f"unknown generated block {name!r} in {source}: known blocks are {known}")
        return f"{match[1]}{generators[name]()}\n{match[4]}"

    return BLOCK.sub(replace, text)


def stale_files(docs: Path, results: Path | None = None) -> list[Path]:
    """The Markdown files under ``docs`` whose generated blocks differ from the code or the benchmarks' results."""
    results = results_of(docs) if results is None else results
    return [path for path in sorted(docs.rglob("*.md"))
            if render(path.read_text(), source=str(path), results=results) != path.read_text()]


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or with ``--check``, verify) the generated tables of the docs."""
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("docs", nargs="?", type=Path, default=Path("docs"), help="the docs directory (default: ./docs)")
    parser.add_argument("--check", action="store_true", help="only report files that are out of date (exit 1)")
    parser.add_argument("--results", type=Path, help="the benchmarks' latest-results files (default: DOCS/../benchmarks/results)")
    args = parser.parse_args(argv)
    if not args.docs.is_dir():
        print(f"{COMMAND}: error: {args.docs}: no such directory", file=sys.stderr)
        return 2
    results = args.results or results_of(args.docs)
    try:
        stale = stale_files(args.docs, results)
    except FiguresError as exc:
        print(f"{COMMAND}: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for path in stale:
            print(f"{path}: generated tables differ from the code or the benchmarks' results;"
                  f" run `{COMMAND}` to regenerate them")
        return 1 if stale else 0
    for path in stale:
        path.write_text(render(path.read_text(), source=str(path), results=results))
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
