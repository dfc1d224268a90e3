"""Reviewer-facing reports: report.html (escaping, chart, Chromium rendering), the crawlmem CLI, JUnit properties."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from inner_session import inner_session
from spiders_source import SPIDERS

from pytest_crawlmem.core.budgets import Budgets, Violation
from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint, CrawlResult, DroppedResponse, GrowthSite, Peaks, Sample
from pytest_crawlmem.probes.recording import Recording
from pytest_crawlmem.reports import report as report_module
from pytest_crawlmem.reports.cli import main
from pytest_crawlmem.reports.document import ReportDocument
from pytest_crawlmem.reports.html import render_html
from pytest_crawlmem.reports.report import report_document, write_reports
from pytest_crawlmem.reports.svgchart import decimate, nice_ticks

HOSTILE = "<script>alert(1)</script>"

# -- pure: a synthetic crawl with hostile strings everywhere a crawl's text can reach -------------


def synthetic_crawl(report_dir: Path | None = None, *, leak: bool = True) -> CrawlResult:
    """A crawl of 1,200 responses that leaks 3 KiB per response, with hostile text in every string field."""
    samples = tuple(Sample(t_seconds=n / 100, responses=n, items=n // 2, rss_bytes=80 * 2**20 + 3072 * n * leak,
                           scheduled=200 - n // 10, inflight=8, active_size_bytes=4096 * (n // 10 % 5), backout=False)
                    for n in range(0, 1201, 10))
    checkpoints = [Checkpoint(responses=n, t_seconds=n / 100, rss_bytes=80 * 2**20 + 3072 * n * leak,
                              heap_bytes=20 * 2**20 + 3072 * n * leak, traced_bytes=None, scheduled=200 - n // 10,
                              live_refs={"Request": 200 - n // 10, HOSTILE: 1}, drained=n != 450)
                   for n in (0, 100, 200, 300, 450, 675, 1012, 1200)]
    return CrawlResult(
        spider=HOSTILE, samples=samples, start_rss=80 * 2**20, end_rss=80 * 2**20 + 3072 * 1200 * leak,
        peak_rss=90 * 2**20, traced_peak=None, responses=1200, items_scraped=600, duration_seconds=12.0,
        finish_reason=HOSTILE, peaks=Peaks(max_scheduled=200, max_inflight=8, max_active_size_bytes=16384),
        growth=analyze(checkpoints, samples),
        dropped=(DroppedResponse(f"http://127.0.0.1/{HOSTILE}?a=1&b=2", f"too big {HOSTILE}", 2**21),),
        status_counts={200: 1190, 404: 10},
        top_growth=(GrowthSite(f"/spiders/{HOSTILE}.py:40", 3_600_000, 1200, 3000.0,
                               (f'File "/spiders/{HOSTILE}.py", line 40', f"self.kept.append(x)  # {HOSTILE}")),),
        live_refs={HOSTILE: 3},
        stats={HOSTILE: HOSTILE, "downloader/response_count": 1200},
        errors=(f"sample failed: ValueError('{HOSTILE}')",),
        report_dir=report_dir,
    )


def synthetic_document(result: CrawlResult) -> dict:
    """report.json's content for ``result`` (budgets broken, a retention path with hostile text)."""
    budgets = Budgets(peak_rss=100 * 2**20, max_inflight=16, max_scheduled=150, max_active_size=2**30, leak="fail")
    violations = [Violation("max_scheduled", 200, 150, "the scheduler queue reached 200, over the budget max_scheduled=150"),
                  Violation("leak", 3072, 1024, f"{result.growth.reason} {HOSTILE}")]
    document = report_document(result, test_id=f"tests/test_x.py::test_it[{HOSTILE}]", budgets=budgets,
                               violations=violations)
    document["result"]["retention"] = [{"class": HOSTILE, "count": 3, "path": f"class spiders.X .kept -> {HOSTILE}"}]
    return json.loads(json.dumps(document, default=str))


def records(result: CrawlResult) -> tuple[list[Sample], list[Checkpoint]]:
    return list(result.samples), list(result.growth.checkpoints)


def typed(document: dict) -> ReportDocument:
    """report.json's content read back, as report.html is rendered from it."""
    return ReportDocument.from_json(document)


def test_every_string_from_a_crawl_is_escaped_and_the_page_has_no_script():
    result = synthetic_crawl()
    page = render_html(typed(synthetic_document(result)), *records(result), header={"spider": HOSTILE},
                       problems=[f"line 9: not valid JSON {HOSTILE}"], files=[f"{HOSTILE}.json"])
    assert "<script" not in page.lower()
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    for where in ("test_it[", "/spiders/", "self.kept.append(x)  # ", "http://127.0.0.1/", "too big ", "ValueError(&#x27;",
                  "line 9: not valid JSON ", "class spiders.X .kept -&gt; "):
        assert where + escaped in page, where
    assert "a=1&amp;b=2" in page
    assert "default-src 'none'" in page  # nothing can be loaded or run, even if escaping ever failed


def test_the_page_shows_verdict_budgets_sites_checkpoints_and_the_chart_marks():
    result = synthetic_crawl()
    page = render_html(typed(synthetic_document(result)), *records(result))
    assert result.growth.verdict == "retained-objects"
    assert result.growth.reason.replace("'", "&#x27;") in page
    assert page.count('class="series series-rss"') == 2  # against responses and against time
    assert 'class="series series-heap dot"' in page
    assert 'class="marker warmup"' in page and 'class="marker checkpoint undrained"' in page
    assert ">\u2191 peak_rss 100 MiB</text>" in page  # over 3x the growth above the zoomed RSS axis: named, not drawn
    assert ">\u2191 max_active_size 1 GiB</text>" in page  # far above the data: named, not drawn
    assert ">max_inflight 16</text>" in page
    assert page.count('<span class="badge fail">broken</span>') == 2  # max_scheduled and leak
    assert "3.4 MiB" in page and "3,000.0 B" in page  # the growth site
    assert "<td>judged</td>" in page and "<td>warm-up</td>" in page
    for heading in ("Budgets", "Violations", "Top growth sites", "Checkpoints", "Live Scrapy objects after close",
                    "Responses by status", "Dropped responses", "Environment"):
        assert f">{heading}</h2>" in page


def test_a_document_without_samples_still_renders():
    result = synthetic_crawl()
    document = synthetic_document(result)
    page = render_html(typed(document), [], [])
    assert "<h2>Checkpoints</h2>" in page and "<svg" in page  # checkpoints come from report.json then
    document["result"]["growth"]["checkpoints"] = []
    assert "No samples were recorded" in render_html(typed(document), [], [])


def test_long_series_are_thinned_but_keep_their_peaks():
    points = [(float(i), float(i % 100)) for i in range(100_000)]
    points[54_321] = (54_321.0, 10_000.0)
    thin = decimate(points, 800)
    assert len(thin) <= 4 * 800
    assert (54_321.0, 10_000.0) in thin
    assert thin[0] == points[0] and thin[-1] == points[-1]


def test_byte_ticks_fall_on_binary_units():
    assert nice_ticks(0, 121 * 2**20, binary=True) == [0, 50 * 2**20, 100 * 2**20, 150 * 2**20]
    assert nice_ticks(0, 2050) == [0, 500, 1000, 1500, 2000, 2500]


def test_write_reports_adds_report_html(tmp_path):
    result = synthetic_crawl(tmp_path)
    write_reports(tmp_path, result, test_id="t.py::test_it", budgets=None, violations=[])
    assert {p.name for p in tmp_path.iterdir()} == {"report.json", "tracemalloc-diff.txt", "report.html"}
    assert "samples.jsonl not found" in (tmp_path / "report.html").read_text()


def test_a_rendering_failure_keeps_the_data_and_writes_report_error_txt(tmp_path, monkeypatch):
    recording = Recording(tmp_path / "samples.jsonl")
    recording.header(spider="catalog", interval_seconds=0.1)
    recording.add_sample(Sample(t_seconds=0.1, responses=1, items=0, rss_bytes=2**26))
    recording.close()
    (tmp_path / "report.html").write_text("a stale page of an earlier crawl")

    def broken(*args: object, **kwargs: object) -> str:
        raise RuntimeError(f"renderer bug {HOSTILE}")

    monkeypatch.setattr("pytest_crawlmem.reports.loading.render_html", broken)
    result = synthetic_crawl(tmp_path)
    report_module.write_reports(tmp_path, result, test_id="t.py::test_it", budgets=None, violations=[])
    assert {p.name for p in tmp_path.iterdir()} == {"report.json", "samples.jsonl", "tracemalloc-diff.txt", "report-error.txt"}
    error = (tmp_path / "report-error.txt").read_text()
    assert "report.html could not be rendered" in error and "RuntimeError: renderer bug" in error
    assert json.loads((tmp_path / "report.json").read_text())["result"]["responses"] == 1200
    monkeypatch.undo()
    report_module.write_html_report(tmp_path)  # fixed: the next render replaces the error
    assert (tmp_path / "report.html").exists() and not (tmp_path / "report-error.txt").exists()


# -- the CLI on synthetic reports ----------------------------------------------------------------------


def write_synthetic_dir(path: Path, *, leak: bool) -> Path:
    result = synthetic_crawl(path, leak=leak)
    recording = Recording(path / "samples.jsonl")
    recording.header(spider="catalog", interval_seconds=0.1)
    for sample in result.samples:
        recording.add_sample(sample)
    for checkpoint in result.growth.checkpoints:
        recording.add_checkpoint(checkpoint)
    recording.close()
    write_reports(path, result, test_id=f"t.py::test_{'leak' if leak else 'clean'}", budgets=None, violations=[])
    return path


def test_cli_diff_compares_figures_verdicts_and_growth_sites(tmp_path, capsys):
    a = write_synthetic_dir(tmp_path / "a", leak=False)
    b = write_synthetic_dir(tmp_path / "b", leak=True)
    assert main(["diff", str(a), str(b / "report.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"A: {a} (t.py::test_clean)"
    rows = {line.split("  ")[0]: line.split() for line in out[3:]}
    assert rows["responses"][1:] == ["1,200", "1,200", "0"]
    assert rows["end RSS"][2:] == ["80.0", "MiB", "83.5", "MiB", "+3.5", "MiB", "(+4.4%)"]
    assert rows["verdict"][1:] == ["steady", "retained-objects", "changed"]
    assert any(line.startswith(f"/spiders/{HOSTILE}.py:40") and "+3.4 MiB (3,000 B/response)" in line for line in out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "{tmp}/missing"], "crawlmem: error: {tmp}/missing: no such file or directory"),
        (["report", "{tmp}"], "crawlmem: error: {tmp}: neither report.json nor samples.jsonl is in this directory"),
        (["report", "{tmp}/bad.json"], "crawlmem: error: {tmp}/bad.json: not a readable report.json (*"),
        (["report", "{tmp}/notes.txt"], "crawlmem: error: {tmp}/notes.txt: no crawlmem samples or checkpoints in this file*"),
        (["diff", "{tmp}/bad.json", "{tmp}/missing"], "crawlmem: error: {tmp}/bad.json: not a readable report.json*"),
    ],
)
def test_cli_bad_paths_exit_2_naming_the_path(tmp_path, capsys, args, message):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "notes.txt").write_text("hello\n")
    assert main([a.format(tmp=tmp_path) for a in args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert fnmatch(captured.err.strip(), message.format(tmp=tmp_path)), captured.err


# -- real crawls: report.html in Chromium, the CLI on their files, JUnit properties ---------------------

REAL_SPIDERS = SPIDERS + f'''

class Hostile(Catalog):
    """Keeps 4 KiB per product page; the retaining line carries a hostile comment into the traceback."""

    name = "hostile"
    kept = []

    def parse_product(self, response):
        self.kept.append(b"x" * 4096 + response.url.encode())  # {HOSTILE}
        yield from super().parse_product(response)
'''

REAL_TESTS = f'''
import pytest
from spiders import *


@pytest.mark.crawl_memory(peak_rss="2 GiB", max_inflight=16, leak="warn")
@pytest.mark.parametrize("case", [pytest.param(1, id="{HOSTILE}")])
def test_leaky(crawl, fixture_site, case):
    crawl(Hostile, start_urls=[fixture_site.url("/catalog/?pages=50&per_page=20")])


@pytest.mark.crawl_memory(peak_rss="2 GiB", rss_growth="200 MiB", max_scheduled=5000, max_inflight=64, kill_at="4 GiB",
                          timeout=600)
def test_clean(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=30&per_page=20")])
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=1&per_page=5")])


async def capture(job):
    context = await job.browser.new_context()
    for batch in job.batches(range(12), 3):
        for number in batch:
            page = await context.new_page()
            await page.goto(job.url(f"/js/{{number}}"))
            await page.close()
            job.page_done()
        await job.checkpoint()
    await context.close()


@pytest.mark.crawl_memory(browser_pss="3 GiB", max_open_pages=2, leak="warn")
def test_browser(browser_job, fixture_site):
    pytest.importorskip("playwright")
    from pytest_crawlmem.browser.settings import BrowserNotFound, chromium_path
    try:
        chromium_path()
    except BrowserNotFound as exc:
        pytest.skip(str(exc))
    assert browser_job(capture).responses == 12


@pytest.mark.crawl_memory(peak_rss="2 GiB", max_dropped=0)
def test_sweep(crawl_sweep, fixture_site):
    sweep = crawl_sweep(Catalog, {{"narrow": {{"CONCURRENT_REQUESTS": 2}}, "wide": {{"CONCURRENT_REQUESTS": 16}},
                                  "capped": {{"CONCURRENT_REQUESTS": 16, "DOWNLOAD_MAXSIZE": 32 * 1024}}}},
                        start_urls=[fixture_site.url("/catalog/?pages=3&per_page=10"), fixture_site.url("/large/9?kb=64")],
                        isolate=False)
    assert sweep.best() is not None
'''


@pytest.fixture
def real_reports(pytester: pytest.Pytester) -> Path:
    """The directory of REAL_TESTS' run (a leaky crawl with a hostile test id and source line, clean ones, a browser
    job, a sweep): run once through pytester's ``runpytest_subprocess`` by the first test that needs it."""
    (pytester.path / "spiders.py").write_text(REAL_SPIDERS)  # the first test's directory is where the run happens
    outcome, root = inner_session(pytester, REAL_TESTS, "[pytest]\n", "--junitxml=junit.xml", timeout=600)
    assert outcome.ret == 0, outcome.stdout.str() + outcome.stderr.str()
    return root


def leaky_dir(root: Path) -> Path:  # inner_session runs REAL_TESTS as test_suite.py
    return next((root / ".crawlmem").glob("test_suite.py__test_leaky*"))


def clean_dir(root: Path) -> Path:
    return root / ".crawlmem" / "test_suite.py__test_clean"


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    browser = chromium_path()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium): cannot render report.html in a browser")
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    return subprocess.run(command, capture_output=True, timeout=120)


def png_pixels(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium writes): width, height, rows, bytes per pixel."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IHDR":
            header = data[pos + 8:pos + 8 + length]
        elif kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert (depth, interlace) == (8, 0) and color in (2, 6)
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def test_the_plugin_writes_report_html_that_chromium_renders_with_its_chart(real_reports, tmp_path, request):
    report_dir = leaky_dir(real_reports)
    assert not (report_dir / "report-error.txt").exists()
    page = (report_dir / "report.html").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script" not in page  # test id and traceback line
    dom = chromium(tmp_path, "--dump-dom", (report_dir / "report.html").as_uri())
    assert dom.returncode == 0, dom.stderr.decode()[-2000:]
    html = dom.stdout.decode()
    assert "<script" not in html
    assert html.count('<polyline class="series series-rss"') >= 2 and '<svg class="timeline"' in html
    assert 'class="marker warmup"' in html and 'class="marker checkpoint"' in html
    assert "retained-objects" in html
    shot = tmp_path / "report-html.png"
    done = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1600", (report_dir / "report.html").as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr.decode()[-2000:]
    artifacts = request.config.rootpath / ".crawlmem" / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, artifacts / "report-html.png")
    width, height, rows, bpp = png_pixels(shot.read_bytes())
    assert (width, height) == (1200, 1600)
    colors = {row[i:i + 3] for row in rows[::8] for i in range(0, len(row), bpp * 4)}
    assert len(colors) > 50, "the screenshot is nearly blank"
    rss_blue = sum(1 for row in rows for i in range(0, len(row), bpp)
                   if row[i] < 40 and abs(row[i + 1] - 0x72) < 40 and abs(row[i + 2] - 0xB2) < 40)
    assert rss_blue > 300, "the RSS line is not visible in the screenshot"


def test_cli_renders_a_real_report_dir_and_a_bare_truncated_samples_jsonl(real_reports, tmp_path):
    out = tmp_path / "out.html"
    done = subprocess.run([sys.executable, "-m", "pytest_crawlmem", "report", str(clean_dir(real_reports)), "-o", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"wrote {out}"
    assert "steady" in out.read_text() or "inconclusive" in out.read_text()
    lines = (clean_dir(real_reports) / "samples.jsonl").read_bytes().splitlines(keepends=True)
    bare = tmp_path / "prod" / "crawlmem-samples.jsonl"
    bare.parent.mkdir()
    bare.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # killed while writing the last line
    assert main(["report", str(bare)]) == 0
    page = (bare.parent / "report.html").read_text()
    assert f"line {len(lines)}: cut off" in page and "Built from crawlmem-samples.jsonl alone" in page
    assert page.count('<polyline class="series series-rss"') == 2


def test_cli_diff_of_two_real_reports(real_reports, capsys):
    assert main(["diff", str(clean_dir(real_reports)), str(leaky_dir(real_reports))]) == 0
    out = capsys.readouterr().out
    assert "peak RSS" in out and "growth/response" in out
    verdict = next(line for line in out.splitlines() if line.startswith("verdict"))
    assert verdict.split()[2] == "retained-objects"
    assert "spiders.py:" in out


def test_junit_xml_carries_each_crawls_figures(real_reports):
    cases = {case.get("name"): case for case in ET.parse(real_reports / "junit.xml").iter("testcase")}
    clean = {p.get("name"): p.get("value") for p in cases["test_clean"].iter("property")}
    assert clean["crawlmem_responses"] == "630" and clean["crawlmem_responses_2"] == "6"
    first = json.loads((clean_dir(real_reports) / "report.json").read_text())["result"]
    assert clean["crawlmem_peak_rss"] == str(first["peak_rss"]) and clean["crawlmem_rss_growth"] == str(first["rss_growth"])
    assert clean["crawlmem_verdict"] == first["verdict"] != "retained-objects"
    assert float(clean["crawlmem_growth_per_response"]) == round(first["growth"]["per_response_bytes"], 1)
    assert clean["crawlmem_verdict_2"] == "inconclusive" and clean["crawlmem_growth_per_response_2"] == ""
    assert clean["crawlmem_report_dir"] == str(clean_dir(real_reports))
    assert clean["crawlmem_report_dir_2"] == str(clean_dir(real_reports) / "crawl-2")
    leaky = {p.get("name"): p.get("value") for p in cases[f"test_leaky[{HOSTILE}]"].iter("property")}
    assert leaky["crawlmem_verdict"] == "retained-objects" and leaky["crawlmem_responses"] == "1050"


# -- layout in real Chromium at 1400 px: what a reviewer sees -------------------------------------------

#: Runs in the page: text boxes that overlap another, SVG text outside its chart, panels with nothing drawn,
#: boxes wider than their container; and where the at-a-glance table ends.
LAYOUT_SCRIPT = """() => {
  const visible = r => r.width > 0.5 && r.height > 0.5;
  const boxes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!node.textContent.trim() || parent.closest('svg, title') || !parent.checkVisibility()) continue;
    const range = document.createRange(); range.selectNodeContents(node);
    for (const r of range.getClientRects()) if (visible(r)) boxes.push({r, text: node.textContent.trim().slice(0, 40)});
  }
  const clipped = [];
  for (const svg of document.querySelectorAll('svg')) {
    const frame = svg.getBoundingClientRect();
    if (!visible(frame)) continue;
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (!visible(r)) continue;
      const text = [...t.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim();
      boxes.push({r, text});
      if (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1 || r.bottom > frame.bottom + 1)
        clipped.push(text);
    }
  }
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i].r, b = boxes[j].r;
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 1 && h > 2) overlaps.push(boxes[i].text + ' | ' + boxes[j].text);
  }
  for (const el of document.querySelectorAll('td, th, h1, h2, p, li, .figure, section, header, .scroll, .sweep')) {
    const hides = getComputedStyle(el).overflowX !== 'visible';
    if (el.checkVisibility() && hides && el.scrollWidth > el.clientWidth + 1) clipped.push(el.textContent.slice(0, 60));
  }
  const empty = [];
  for (const g of document.querySelectorAll('svg g.panel'))
    if (visible(g.getBoundingClientRect()) && !g.querySelector('polyline.series, circle.series')) empty.push(g.dataset.panel);
  const glance = document.querySelector('table.glance');
  return {overlaps, clipped, empty, scroll: document.documentElement.scrollWidth - document.documentElement.clientWidth,
          glanceBottom: glance ? glance.getBoundingClientRect().bottom : null,
          budgets: [...document.querySelectorAll('table.budgets tbody tr')]
                   .map(tr => [...tr.cells].map(c => c.textContent.trim())),
          ticks: [...document.querySelectorAll('.by-responses g.panel')].map(g => [g.dataset.panel,
                  [...g.querySelectorAll('text.tick')].map(t => t.textContent)]),
          axis: [...document.querySelectorAll('.by-responses svg > text.tick')].map(t => t.textContent),
          labels: [...document.querySelectorAll('.by-responses text.budget-label')].map(t => t.lastChild.textContent)};
}"""


#: Opens each page given on the command line in Chromium at 1400 x 900 px, saves an above-the-fold screenshot
#: next to the path given after it, and prints LAYOUT_SCRIPT's findings as JSON. A subprocess: Playwright's sync
#: API cannot run beside pytest-twisted's asyncio loop.
MEASURE = """
import json, sys
from playwright.sync_api import sync_playwright
pairs = list(zip(sys.argv[3::2], sys.argv[4::2]))
with sync_playwright() as playwright:
    browser = playwright.chromium.launch(executable_path=sys.argv[1], args=["--disable-gpu", "--no-sandbox"])
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    found = []
    for path, shot in pairs:
        page.goto("file://" + path)
        page.screenshot(path=shot)
        found.append(page.evaluate(sys.argv[2]))
    browser.close()
print(json.dumps(found))
"""


def layout(pages: list[Path], shots: Path) -> list[dict]:
    """Measure the layout of each page in real Chromium; screenshots go to ``shots``."""
    pytest.importorskip("playwright", reason="the browser extra is not installed: pip install -e '.[browser]'")
    browser = chromium_path()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    shots.mkdir(parents=True, exist_ok=True)
    args = [str(x) for page in pages for x in (page.resolve(), shots / f"{page.parent.name[:40]}-{page.stem}.png")]
    done = subprocess.run([sys.executable, "-c", MEASURE, browser, LAYOUT_SCRIPT, *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def assert_readable(found: dict, name: str) -> None:
    assert found["overlaps"] == [], f"{name}: overlapping text {found['overlaps'][:5]}"
    assert found["clipped"] == [], f"{name}: clipped text {found['clipped'][:5]}"
    assert found["empty"] == [], f"{name}: empty panels {found['empty']}"
    assert found["scroll"] <= 0, f"{name}: the page scrolls sideways by {found['scroll']} px"


def assert_answers_above_the_fold(found: dict, name: str) -> None:
    assert found["glanceBottom"] is not None and found["glanceBottom"] <= 900, f"{name}: the summary is below the fold"
    for row in found["budgets"]:
        assert "not checked" not in row[3], f"{name}: budget {row[0]} is enforced but shown as {row[3]!r}"
        assert row[3].startswith(("kept", "broken", "warned", "threshold", "tolerance")), f"{name}: {row}"


def artifacts_dir(request: pytest.FixtureRequest) -> Path:
    return request.config.rootpath / ".crawlmem" / "artifacts"


@pytest.mark.slow  # starts a crawl or a browser in a subprocess of its own
def test_synthetic_reports_are_readable_at_1400_px(tmp_path, request):
    pages = []
    for leak in (False, True):
        result = synthetic_crawl(tmp_path, leak=leak)
        path = tmp_path / f"synthetic-{'leaky' if leak else 'clean'}" / "report.html"
        path.parent.mkdir()
        path.write_text(render_html(typed(synthetic_document(result)), *records(result)))
        pages.append(path)
    for path, found in zip(pages, layout(pages, artifacts_dir(request)), strict=True):
        assert_readable(found, path.parent.name)
        assert_answers_above_the_fold(found, path.parent.name)


def test_real_reports_answer_above_the_fold_and_are_readable_in_chromium(real_reports, request):
    browser = real_reports / ".crawlmem" / "test_suite.py__test_browser" / "report.html"
    sweep = real_reports / ".crawlmem" / "test_suite.py__test_sweep" / "sweep.html"
    pages = [clean_dir(real_reports) / "report.html", leaky_dir(real_reports) / "report.html", sweep]
    pages += [browser] if browser.exists() else []
    clean, leaky, swept, *browser_found = layout(pages, artifacts_dir(request))
    for found, name in ((clean, "clean crawl"), (leaky, "leaky crawl")):
        assert_readable(found, name)
        assert_answers_above_the_fold(found, name)
    assert {row[0] for row in clean["budgets"]} == {"peak_rss", "rss_growth", "max_scheduled", "max_inflight", "kill_at",
                                                    "timeout", "leak"}
    assert any(label.endswith("rss_growth 200 MiB") for label in clean["labels"]), clean["labels"]  # the budget, not start + it
    rss_ticks = dict(leaky["ticks"])["RSS"]
    assert rss_ticks[0] != "0", f"the RSS axis starts at 0 and flattens the growth: {rss_ticks}"
    above_chart = (leaky_dir(real_reports) / "report.html").read_text().split('<section id="timeline">')[0]
    assert "spiders.py:" in above_chart and "what to change" in above_chart  # where it grew and the fix, above the chart

    assert_readable(swept, "sweep")
    document = json.loads(sweep.with_suffix(".json").read_text())
    why = sweep.read_text().split("Why not the others")[1]
    for variant in {row["variant"] for row in document["variants"]} - {document["best"]}:
        assert f"<td>{variant}</td><td>" in why, f"{variant} is not listed with its reason"
    assert "dropped by a size limit" in why and "ranked above it" in why

    if not browser_found:
        pytest.skip("the browser job was skipped (no playwright)")
    (job,) = browser_found
    assert_readable(job, "browser job")
    assert_answers_above_the_fold(job, "browser job")
    assert {row[0] for row in job["budgets"]} == {"browser_pss", "max_open_pages", "leak"}
    ticks = dict(job["ticks"])
    assert {"Browser tree", "Open pages"} <= set(ticks) and not set(ticks) & {"Scheduler", "In flight", "Scraper"}
    assert float(job["axis"][-1].replace(",", "")) <= 12  # the x axis runs to the 12 pages, not to a warm-up of 150
    assert len(ticks["Open pages"]) == len(set(ticks["Open pages"]))  # whole numbers: no "1 1 1 0 0 0"
    html = browser.read_text()
    assert "PSS" in html and "USS" in html and "pages processed" in html and "browser job" in html


def test_what_to_change_says_no_budget_was_set_when_none_was_and_the_budgets_were_kept_when_they_were():
    result = synthetic_crawl(leak=False)
    assert result.growth.verdict == "steady"
    for budgets, said, not_said in ((None, "no budget was set", "the budgets were kept"),
                                    (Budgets(peak_rss=2**30), "the budgets were kept", "no budget was set and")):
        document = json.loads(json.dumps(report_document(result, test_id="t", budgets=budgets, violations=[]),
                                         default=str))
        page = render_html(typed(document), *records(result))
        glance = page[page.index('class="glance"'):page.index("</table>", page.index('class="glance"'))]
        assert f"nothing: {said} and memory levelled off" in glance, glance
        assert not_said not in glance, glance
