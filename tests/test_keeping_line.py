"""The line a leak verdict names first is the one that stores into the holder, wherever the holder is (issue 27).

One inner pytest session (a subprocess, real crawls of the fixture site) runs one spider per holder shape: a dict two
and three levels below the spider, a class-level registry, an ``lru_cache`` on a method, a signal receiver's module
list, a downloader middleware's dict, a stats key per URL, lxml elements and a pipeline's Pillow thumbnails (native
memory). Each allocates what it keeps
on one line and stores it on another; the tests read the inner session's output and reports (pytester's
``runpytest_subprocess``, shared by the module's tests through ``inner_session``).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from inner_session import inner_session
from keeping_suite_source import SUITE

CASES = ["cached_details", "class_registry", "component_dict", "deep_groups", "deeper_groups", "kept_elements",
         "kept_thumbnails", "signal_list", "stats_per_url"]
#: Leaks of C-extension objects: the reason names them as the owners of the native growth.
NATIVE = {"kept_elements": ("lxml.html.HtmlElement", "spider.nodes -> list["),
          "kept_thumbnails": ("PIL.Image.Image", "pipeline Thumbnails.thumbnails -> dict[")}
PYTHON_LEVEL = [c for c in CASES if c not in NATIVE]
LINE = re.compile(r"test_suite\.py:\d+")


class Output(NamedTuple):
    """What the inner session printed."""

    stdout: str
    stderr: str


@pytest.fixture
def inner(pytester: pytest.Pytester) -> tuple[Output, Path]:
    # 9 crawls of 630 responses: 71 CPU-s (102 at 840), 15 wall minutes on a loaded machine
    outcome, root = inner_session(pytester, SUITE, "[pytest]\n", "-rA", "-v", timeout=2700)
    return Output(outcome.stdout.str(), outcome.stderr.str()), root


def report_dir(root: Path, case: str) -> Path:
    return root / ".crawlmem" / f"test_suite.py__test_leak_{case}_"


def result_of(root: Path, case: str) -> dict[str, Any]:
    return json.loads((report_dir(root, case) / "report.json").read_text())["result"]  # type: ignore[no-any-return]


def marked(case: str, what: str) -> tuple[str, str]:
    """``("test_suite.py:N", source)`` of the line marked ``# KEEPS case`` / ``# ALLOCATES case``."""
    number, text = next((i, t) for i, t in enumerate(SUITE.splitlines(), 1) if t.rstrip().endswith(f"# {what} {case}"))
    return f"test_suite.py:{number}", text.strip()


def failure_message(proc: Output, case: str) -> str:
    block = proc.stdout.split(f"test_leak[{case}] _")[1]
    return next(line for line in block.splitlines() if line.startswith("crawl_memory budget broken"))


def test_every_holder_shape_is_flagged(inner):
    proc, root = inner
    assert f"{len(CASES)} failed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    for case in CASES:
        assert result_of(root, case)["verdict"] == "retained-objects", (case, result_of(root, case)["growth"]["reason"])


@pytest.mark.parametrize("case", CASES)
def test_the_first_line_the_failure_names_is_the_one_that_stores_into_the_holder(inner, case):
    proc, root = inner
    keeps, _ = marked(case, "KEEPS")
    message = failure_message(proc, case)
    assert LINE.findall(message)[0] == keeps, message
    reason = result_of(root, case)["growth"]["reason"]
    assert LINE.findall(reason)[0] == keeps, reason


@pytest.mark.parametrize("case", CASES)
def test_report_json_leads_with_the_keeping_line_and_keeps_the_allocation_below_it(inner, case):
    _, root = inner
    keeps, _ = marked(case, "KEEPS")
    allocates, _ = marked(case, "ALLOCATES")
    result = result_of(root, case)
    sites = [s["location"] for s in result["top_growth"]]
    assert sites[0] == keeps, sites
    assert result["holders"][0]["line"] == keeps, result["holders"]
    if case != "cached_details":  # the allocating line there is the call, whose arguments the cache keeps
        assert allocates in sites[1:], sites


@pytest.mark.parametrize("case", CASES)
def test_a_request_creation_line_never_leads(inner, case):
    _, root = inner
    lines = SUITE.splitlines()
    first = result_of(root, case)["top_growth"][0]["location"]
    source = lines[int(first.rsplit(":", 1)[1]) - 1]
    assert "follow" not in source and "Request(" not in source, (first, source)


@pytest.mark.parametrize("case", CASES)
def test_the_where_row_shows_the_users_frame_with_its_own_source_line(inner, case):
    _, root = inner
    keeps, source = marked(case, "KEEPS")
    page = (report_dir(root, case) / "report.html").read_text()
    row = page.split("<td>where</td>", 1)[1].split("</tr>", 1)[0]
    assert f"<code>{keeps}</code>" in row, row
    assert f'<code class="src">{html.escape(source, quote=True)}</code>' in row, row


@pytest.mark.parametrize("case", ["component_dict", "stats_per_url", "deep_groups", "deeper_groups", "class_registry",
                                  "cached_details", "kept_thumbnails"])
def test_holders_at_any_depth_and_in_scrapy_components_are_named(inner, case):
    _, root = inner
    expected = {"component_dict": "downloader middleware PageStore.pages -> dict[", "stats_per_url": "stats._stats -> dict[",
                "deep_groups": "spider.groups[…]['items'] -> ", "deeper_groups": "spider.shop['groups'][…]['items'] -> ",
                "class_registry": "class test_suite.Page.registry -> dict[",
                "cached_details": "spider.details -> _lru_cache_wrapper[",
                "kept_thumbnails": "pipeline Thumbnails.thumbnails -> dict["}[case]
    holders = result_of(root, case)["holders"]
    assert holders and holders[0]["path"].startswith(expected), holders


@pytest.mark.parametrize("case", sorted(NATIVE))
def test_native_growth_is_said_with_its_share_and_its_owners(inner, case):
    _, root = inner
    reason = result_of(root, case)["growth"]["reason"]
    share = re.search(r"(\d+)% of the growth is native: memory allocated by C extensions, invisible to tracemalloc", reason)
    assert share and int(share.group(1)) >= 50, reason
    keeps, _ = marked(case, "KEEPS")
    owner, holder = NATIVE[case]
    assert f"owned by {owner}" in reason and f"held in {holder}" in reason, reason
    assert reason.index(keeps) < reason.index("native"), reason


@pytest.mark.parametrize("case", PYTHON_LEVEL)
def test_python_level_leaks_are_not_called_native(inner, case):
    _, root = inner
    assert "native" not in result_of(root, case)["growth"]["reason"]


@pytest.mark.parametrize("case", CASES)
def test_the_verbose_summary_row_names_the_keeping_line(inner, case):
    proc, _ = inner
    keeps, _ = marked(case, "KEEPS")
    table = proc.stdout.split("crawl memory =", 1)[1]
    header = next(line for line in table.splitlines() if line.startswith("test "))
    row = next(line for line in table.splitlines() if line.startswith(f"test_suite.py::test_leak[{case}]"))
    assert header.rstrip().endswith("where"), header
    assert row.rstrip().endswith(keeps), row
