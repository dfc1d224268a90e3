"""Reading samples.jsonl back: killed crawls, corrupt lines and garbage are reported, never raised (pure)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crawlmem.html import render_html
from pytest_crawlmem.jsonl import checkpoint_from_json, read_samples_jsonl
from pytest_crawlmem.loading import document_from_samples
from pytest_crawlmem.models import Checkpoint, Sample


def sample(n: int) -> dict:
    return {"kind": "sample", **Sample(t_seconds=n / 10, responses=n, items=n // 2, rss_bytes=2**26 + n,
                                       scheduled=n % 7, inflight=3, active_size_bytes=1024, backout=False).to_json()}


def checkpoint(n: int) -> dict:
    return {"kind": "checkpoint", **Checkpoint(responses=n, t_seconds=n / 10, rss_bytes=2**26, heap_bytes=2**24,
                                               traced_bytes=None, scheduled=5, live_refs={"Request": 5}).to_json()}


def stream(records: list[dict]) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


HEADER = {"kind": "header", "spider": "catalog", "interval_seconds": 0.1}
RECORDS = [HEADER, checkpoint(0), *(sample(n) for n in range(1, 30)), checkpoint(100), sample(120), checkpoint(130)]


def test_a_whole_stream_reads_back_without_problems(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(stream(RECORDS))
    header, samples, checkpoints, problems = read_samples_jsonl(path)
    assert header == {"spider": "catalog", "interval_seconds": 0.1}
    assert len(samples) == 30 and len(checkpoints) == 3
    assert problems == []
    assert checkpoint_from_json(checkpoints[1]) == Checkpoint(**{k: v for k, v in checkpoint(100).items() if k != "kind"})


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(min_value=1, max_value=len(stream(RECORDS)) - 1))
def test_a_stream_cut_anywhere_keeps_every_whole_line_and_names_the_cut_one(tmp_path_factory, cut):
    data = stream(RECORDS)
    path = tmp_path_factory.mktemp("cut") / "samples.jsonl"
    path.write_bytes(data[:cut])
    header, samples, checkpoints, problems = read_samples_jsonl(path)
    whole = data[:cut].count(b"\n")
    kept = RECORDS[:whole]
    assert len(samples) + len(checkpoints) + bool(header) in (len(kept), len(kept) + 1)  # + the cut line if it parses
    assert len(problems) <= 1
    if problems:
        assert problems[0].startswith(f"line {whole + 1}: cut off")


def test_corrupt_lines_in_the_middle_are_reported_by_number_and_skipped(tmp_path):
    lines = stream(RECORDS).split(b"\n")
    lines[3] = b'{"kind":"sample","t_sec\x00\x00\x00'
    lines[5] = b"[1, 2]"
    lines[7] = json.dumps({"kind": "sample", "t_seconds": "soon", "responses": 1, "items": 0, "rss_bytes": 1}).encode()
    lines[9] = b"\xff\xfe not text"
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"\n".join(lines))
    _, samples, _, problems = read_samples_jsonl(path)
    assert len(samples) == 30 - 4
    assert [p.split(":")[0] for p in problems] == ["line 4", "line 6", "line 8", "line 10"]
    assert "a JSON list, not an object" in problems[1]
    assert "without a number for t_seconds" in problems[2]


def test_figures_no_crawl_could_measure_are_refused(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(stream([HEADER, {**sample(1), "rss_bytes": -1}, {**sample(2), "inflight": 1e300}, sample(3)]))
    _, samples, _, problems = read_samples_jsonl(path)
    assert len(samples) == 1
    assert problems == ["line 2: sample with rss_bytes out of range (0 to 2**53)",
                        "line 3: sample with inflight out of range (0 to 2**53)"]


def test_only_the_last_of_several_appended_crawls_is_read(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(stream(RECORDS) + stream([{**HEADER, "spider": "again"}, checkpoint(0), sample(1)]))
    header, samples, checkpoints, problems = read_samples_jsonl(path)
    assert header["spider"] == "again"
    assert (len(samples), len(checkpoints)) == (1, 1)
    assert problems == [f"2 crawls were appended to this file; only the last one (from line {len(RECORDS) + 1}) is read"]


def test_errors_the_crawl_recorded_are_reported(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(stream([HEADER, {"kind": "error", "message": "sample failed: OSError()"}, sample(1)]))
    assert read_samples_jsonl(path).problems == ["line 2: the crawl recorded an error: sample failed: OSError()"]


def test_a_flood_of_bad_lines_gives_a_bounded_list_of_problems(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_bytes(b"garbage\n" * 5000)
    problems = read_samples_jsonl(path).problems
    assert len(problems) == 21
    assert problems[-1] == "... and 4,980 more unusable lines"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
RECORD_LIKE = st.fixed_dictionaries(
    {"kind": st.sampled_from(["header", "sample", "checkpoint", "error", "other"]) | JSON_VALUES},
    optional={name: JSON_VALUES | st.integers(0, 2**40) for name in
              ("t_seconds", "responses", "items", "rss_bytes", "scheduled", "inflight", "heap_bytes", "traced_bytes",
               "live_refs", "backout", "drained", "tracer_bytes", "message")},
)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.one_of(RECORD_LIKE.map(lambda r: json.dumps(r).encode()), st.binary(max_size=40)), max_size=12),
       newline_at_end=st.booleans())
def test_any_content_is_read_and_rendered_without_raising(tmp_path_factory, lines, newline_at_end):
    path = tmp_path_factory.mktemp("fuzz") / "samples.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if newline_at_end else b""))
    header, samples, checkpoints, problems = read_samples_jsonl(path)
    assert isinstance(header, dict) and all(isinstance(p, str) for p in problems)
    for record in checkpoints:
        checkpoint_from_json(record)  # every accepted checkpoint builds
    for record in samples:
        Sample.from_json(record)
    stream = read_samples_jsonl(path)
    page = render_html(document_from_samples(stream, path), samples, checkpoints, header=header, problems=problems)
    assert page.startswith("<!DOCTYPE html>")


NUMBERS = st.integers(0, 2**53) | st.floats(0, 2**53)
SAMPLES = st.builds(lambda *v: {"kind": "sample", **dict(zip(("t_seconds", "responses", "items", "rss_bytes", "scheduled",
                                                                  "inflight", "traced_bytes"), v, strict=True))},
                    *[NUMBERS] * 4, NUMBERS | st.none(), NUMBERS | st.none(), NUMBERS | st.none())
CHECKPOINTS = st.builds(lambda *v: {"kind": "checkpoint", **dict(zip(("responses", "t_seconds", "rss_bytes", "scheduled",
                                                                       "heap_bytes", "drained"), v, strict=True))},
                        *[NUMBERS] * 4, NUMBERS | st.none(), st.booleans())


@settings(max_examples=100, deadline=None)
@given(records=st.lists(SAMPLES | CHECKPOINTS, max_size=25))
def test_well_formed_records_with_any_numbers_render(tmp_path_factory, records):
    path = tmp_path_factory.mktemp("numbers") / "samples.jsonl"
    path.write_bytes(stream([HEADER, *records]))
    contents = read_samples_jsonl(path)
    assert contents.problems == []
    page = render_html(document_from_samples(contents, path), contents.samples, contents.checkpoints)
    assert "<svg" in page or not records
