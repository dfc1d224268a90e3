"""Leaks kept where the holder search looked past are named, stored at the line that stores into the entry that grew
(issue 54).

One inner pytest session (a subprocess, real crawls of the fixture site, ``runpytest_subprocess`` shared by the
module's tests through ``inner_session``) runs one spider per shape of tests/keeping_reach_source.py: a list handed
on in ``request.meta`` beside a middleware writing another key of the same dicts, groups filled through a local, a
``queue.Queue`` whose writer thread died, a logger per product, a ``defaultdict(list)`` on a pipeline.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from inner_session import inner_session
from keeping_reach_source import SUITE

CASES = ["defaultdict_history", "finished_groups", "logger_per_product", "meta_rows", "queue_writer"]
HOLDERS = {"meta_rows": "queued requests.meta['rows'] -> list[",
           "finished_groups": "spider.groups[…]['products'] -> 10 lists[",
           "queue_writer": "pipeline QueueWriter.rows -> Queue[",
           "logger_per_product": "logging.Logger.manager.loggerDict -> dict[",
           "defaultdict_history": "pipeline PriceHistoryPipeline.history -> defaultdict["}
LINE = re.compile(r"test_suite\.py:\d+")


@pytest.fixture
def inner(pytester: pytest.Pytester) -> tuple[str, Path]:
    # 5 crawls of 630 responses
    outcome, root = inner_session(pytester, SUITE, "[pytest]\n", "-rA", "-v", timeout=2400)
    return outcome.stdout.str() + outcome.stderr.str(), root


def result_of(root: Path, case: str) -> dict[str, Any]:
    path = root / ".crawlmem" / f"test_suite.py__test_leak_{case}_" / "report.json"
    return json.loads(path.read_text())["result"]  # type: ignore[no-any-return]


def marked(case: str, what: str) -> str:
    """``test_suite.py:N`` of the line marked ``# KEEPS case`` / ``# ALLOCATES case``."""
    return next(f"test_suite.py:{i}" for i, t in enumerate(SUITE.splitlines(), 1) if t.rstrip().endswith(f"# {what} {case}"))


def failure_message(output: str, case: str) -> str:
    block = output.split(f"test_leak[{case}] _")[1]
    return next(line for line in block.splitlines() if line.startswith("crawl_memory budget broken"))


@pytest.mark.parametrize("case", CASES)
def test_the_leak_is_flagged_and_its_holder_named(inner, case):
    _, root = inner
    result = result_of(root, case)
    assert result["verdict"] == "retained-objects", (case, result["growth"]["reason"])
    assert result["holders"] and result["holders"][0]["path"].startswith(HOLDERS[case]), result["holders"]


@pytest.mark.parametrize("case", CASES)
def test_stored_at_is_the_line_that_stores_into_the_entry_that_grew(inner, case):
    output, root = inner
    keeps = marked(case, "KEEPS")
    result = result_of(root, case)
    assert result["holders"][0]["line"] == keeps, result["holders"]
    assert LINE.findall(result["growth"]["reason"])[0] == keeps, result["growth"]["reason"]
    assert LINE.findall(failure_message(output, case))[0] == keeps, failure_message(output, case)
    assert result["top_growth"][0]["location"] == keeps, [s["location"] for s in result["top_growth"]]


@pytest.mark.parametrize("case", CASES)
def test_the_storing_lines_figure_is_what_the_entries_keep(inner, case):
    """Not the container's own growth (a list's slots: tens of bytes a response beside a KiB-sized leak)."""
    _, root = inner
    result = result_of(root, case)
    leak = result["growth"]["per_response_bytes"]
    kept = result["holders"][0]["entries_bytes_per_response"]
    assert kept is not None and kept >= 0.25 * leak, (kept, leak, result["growth"]["reason"])
    reason = result["growth"]["reason"]
    clause = reason.split(f"top growth {marked(case, 'KEEPS')}", 1)[1].split(";", 1)[0]
    entries = re.match(r": the .* entries keep ([\d,.]+) KiB/response", clause)
    own = re.match(r" \+[\d,.]+ KiB \(([\d,]+) B/response\)", clause)
    stated = float(entries.group(1).replace(",", "")) * 1024 if entries else float(own.group(1).replace(",", "")) if own else 0
    assert stated >= 0.25 * leak, reason


@pytest.mark.parametrize("case", CASES)
def test_a_python_level_holder_is_not_called_native(inner, case):
    _, root = inner
    assert "native" not in result_of(root, case)["growth"]["reason"]
