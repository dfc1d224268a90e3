"""Reading samples.jsonl back: killed crawls, corrupt lines and garbage are reported, never raised (pure)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_crawlmem.core.models import Checkpoint, Sample
from pytest_crawlmem.reports.html import render_html
from pytest_crawlmem.reports.jsonl import checkpoint_from_json, read_samples_jsonl
from pytest_crawlmem.reports.loading import document_from_samples


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
    fields = {k: v for k, v in checkpoint(100).items() if k not in ("kind", *Checkpoint.DERIVED)}  # derived: not read back
    assert checkpoint_from_json(checkpoints[1]) == Checkpoint(**fields)


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
    page = render_html(document_from_samples(stream, path), [Sample.from_json(s) for s in samples],
                       [checkpoint_from_json(c) for c in checkpoints], header=header, problems=problems)
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
    page = render_html(document_from_samples(contents, path), [Sample.from_json(s) for s in contents.samples],
                       [checkpoint_from_json(c) for c in contents.checkpoints])
    assert "<svg" in page or not records


# -- a stream under a size budget: rotated to a compacted history, read back whole --------------------------------


def _rotated_recording(path, *, samples=6000, spike_at=1234, max_bytes=40_000):
    from pytest_crawlmem.probes.recording import Recording

    recording = Recording(path, max_samples=64, max_checkpoints=16, max_bytes=max_bytes)
    recording.header(spider="catalog", interval_seconds=1.0, crawl_id="crawl-a")
    sizes = []
    for n in range(samples):
        rss = 2**30 if n == spike_at else 2**26 + (n % 50) * 4096
        recording.add_sample(Sample(t_seconds=float(n), responses=n * 10, items=n, rss_bytes=rss, scheduled=n % 97,
                                    inflight=4, active_size_bytes=2048, backout=n % 4 == 0))
        if n % 500 == 0:
            recording.add_checkpoint(Checkpoint(responses=n * 10, t_seconds=n + 0.5, rss_bytes=2**26, heap_bytes=None,
                                                traced_bytes=None, scheduled=3, cost_seconds=0.01))
        sizes.append(recording.stream_bytes)
    recording.close()
    return recording, sizes


def test_a_stream_over_its_budget_is_rotated_to_a_history_and_stays_under_the_budget(tmp_path):
    path = tmp_path / "samples.jsonl"
    recording, sizes = _rotated_recording(path)
    history = tmp_path / "samples.jsonl.1"
    assert recording.stream_rotations >= 3 and history.is_file()
    assert max(sizes) <= 40_000 + 400  # at most one record over, then rotated
    assert path.stat().st_size + history.stat().st_size == sizes[-1] <= 40_400


def test_a_rotated_stream_reads_back_whole_with_its_peak_and_every_sample_counted_once(tmp_path):
    path = tmp_path / "samples.jsonl"
    _rotated_recording(path)
    header, samples, checkpoints, problems = read_samples_jsonl(path)
    assert problems == [] and header["crawl_id"] == "crawl-a" and "segment" not in header
    assert max(s["rss_bytes"] for s in samples) == 2**30
    assert max(s["scheduled"] for s in samples) == 96
    assert sum(s.get("span", 1) for s in samples) == 6000
    times = [s["t_seconds"] for s in samples]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert [c["responses"] for c in checkpoints] == sorted(c["responses"] for c in checkpoints)
    assert checkpoints[-1]["responses"] == 55_000

    result = document_from_samples(read_samples_jsonl(path), path).result
    assert result.peak_rss == 2**30 and result.responses == 59_990
    assert abs(result.backout_seconds - 1500) <= 64  # 1 in 4 of 6,000 one-second samples, within a kept sample


def test_crawlmem_report_renders_a_rotated_stream(tmp_path):
    from pytest_crawlmem.reports.cli import main

    path = tmp_path / "samples.jsonl"
    _rotated_recording(path)
    assert main(["report", str(path)]) == 0
    assert "<svg" in (tmp_path / "report.html").read_text()


def test_a_history_left_by_another_crawl_is_ignored(tmp_path):
    path = tmp_path / "samples.jsonl"
    (tmp_path / "samples.jsonl.1").write_bytes(stream([{**HEADER, "crawl_id": "old"}, sample(1), sample(2)]))
    path.write_bytes(stream([{**HEADER, "crawl_id": "new"}, sample(5)]))
    header, samples, _, problems = read_samples_jsonl(path)
    assert header["crawl_id"] == "new" and [s["responses"] for s in samples] == [5] and problems == []


def test_records_in_both_the_history_and_the_stream_after_a_crash_mid_rotation_are_read_once(tmp_path):
    path = tmp_path / "samples.jsonl"
    records = [sample(n) for n in range(1, 6)]
    (tmp_path / "samples.jsonl.1").write_bytes(stream([{**HEADER, "crawl_id": "a", "segment": "history"}, *records]))
    path.write_bytes(stream([{**HEADER, "crawl_id": "a"}, *records, sample(6), checkpoint(60)]))
    _, samples, checkpoints, problems = read_samples_jsonl(path)
    assert [s["responses"] for s in samples] == [1, 2, 3, 4, 5, 6] and len(checkpoints) == 1 and problems == []
