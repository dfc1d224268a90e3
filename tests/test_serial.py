"""report.json derived from the result's dataclass fields: keys are field names, and today's reports still read."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_assemble import every_field_result

from pytest_crawlmem.core.models import Checkpoint, CrawlResult, Growth, Peaks, RetentionPath
from pytest_crawlmem.core.serial import COUNT_ONLY, NOT_WRITTEN, JsonRecord, from_json, record_json
from pytest_crawlmem.reports.document import FIGURE_PATHS
from pytest_crawlmem.reports.loading import load_report
from pytest_crawlmem.reports.report import write_html_report

#: A report dir written by main's writer before report.json named fields (ac85f78: ``max_active_size``, flat peaks,
#: retention's ``class``): every field of the result set, one non-finite delta.
TODAYS_REPORT = Path(__file__).parent / "data" / "report-v1-main"
#: Result fields added after that report was written: they read back as their defaults.
NEWER_FIELDS = frozenset({"replay_per_copy", "replay_rules"})


def test_a_report_written_before_keys_were_field_names_reads_back_every_field(tmp_path):
    written = json.loads((TODAYS_REPORT / "report.json").read_text())["result"]
    assert written["max_active_size"] == 2048 and "peaks" not in written and written["retention"][0]["class"]
    report = load_report(TODAYS_REPORT)
    expected = every_field_result()
    assert report.document.problems == () and report.document.unmeasured == frozenset()
    for name in CrawlResult.__dataclass_fields__:
        if name in NEWER_FIELDS:  # a report written before the field existed reads its default
            assert getattr(report.result, name) == CrawlResult.__dataclass_fields__[name].default, name
        elif name not in ("samples", "report_dir", "stopped_because"):
            assert getattr(report.result, name) == getattr(expected, name), name
    assert math.isnan(report.result.growth.deltas_per_response[1])
    assert report.result.peaks.max_active_size_bytes == 2048 and report.result.retention[0].class_name == "HtmlResponse"


def test_rewriting_todays_report_with_the_field_keys_renders_the_same_page(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(TODAYS_REPORT, old)
    shutil.copytree(TODAYS_REPORT, new)
    rewritten = load_report(old).document.to_json()
    (new / "report.json").write_text(json.dumps(rewritten, indent=2, default=str))
    assert "max_active_size" not in rewritten["result"] and rewritten["result"]["peaks"]["max_active_size_bytes"] == 2048
    assert rewritten["result"]["retention"][0]["class_name"] == "HtmlResponse"
    write_html_report(old)
    write_html_report(new)
    assert (old / "report.html").read_text() == (new / "report.html").read_text()
    assert load_report(new).document == load_report(old).document


def test_every_figure_path_is_a_key_of_the_written_result():
    written = json.loads(json.dumps(every_field_result().to_json()))
    for name, path in FIGURE_PATHS.items():
        value = written
        for step in path:
            value = value[step]
        assert value == getattr(every_field_result(), name) or (value is None and name == "active_size_ratio"), name


def test_an_alias_never_overrides_the_field_it_names():
    data = json.loads(json.dumps(every_field_result().to_json()))
    data["max_scheduled"] = 99  # an older key beside the field: the field wins
    assert CrawlResult.from_json(data).peaks.max_scheduled == 7
    assert RetentionPath.from_json({"class": "Request", "count": 2, "path": None}) == RetentionPath("Request", 2, None)


def test_a_record_lacking_required_fields_is_refused_unless_its_class_fills_them():
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'count'"):  # path is optional: None
        RetentionPath.from_json({"class_name": "Request"})
    assert Growth.from_json({}) == Growth("inconclusive", "")
    assert CrawlResult.from_json({}).peaks == Peaks() and CrawlResult.from_json({"responses": None}).responses == 0
    checkpoint = Checkpoint.from_json({"responses": 1, "t_seconds": 0.5, "rss_bytes": 9, "scheduled": 0, "drained": None})
    assert checkpoint.heap_bytes is None and checkpoint.drained and checkpoint.live_refs == {}


@dataclass(frozen=True, slots=True)
class _Inner(JsonRecord):
    ratio: float
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Outer(JsonRecord):
    inner: _Inner
    counts: dict[int, int] = field(default_factory=dict)
    kept: tuple[int, ...] = field(default=(), metadata=COUNT_ONLY)
    hidden: str = field(default="", metadata=NOT_WRITTEN)
    maybe: _Inner | None = None


@given(st.floats(), st.lists(st.text(), max_size=3), st.dictionaries(st.integers(), st.integers(), max_size=3),
       st.lists(st.integers(), max_size=3), st.booleans())
def test_any_record_round_trips_through_json(ratio, names, counts, kept, with_maybe):
    record = _Outer(_Inner(ratio, tuple(names)), counts, tuple(kept), "x", _Inner(1.0) if with_maybe else None)
    data = json.loads(json.dumps(record_json(record)))
    assert data["kept"] == len(kept) and "hidden" not in data
    again = from_json(_Outer, data, kept=record.kept)
    assert again.counts == counts and again.inner.names == tuple(names) and again.maybe == record.maybe
    assert again.inner.ratio == ratio or (math.isnan(again.inner.ratio) and not math.isfinite(ratio))
