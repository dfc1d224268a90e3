"""Tests of browser process tree measurement: classify() and the /proc parsers on captured
samples (pure), and a real Chromium tree driven by Playwright's async API (no reactor)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.browser.tree import (
    BrowserProcess,
    TreeReading,
    TreeSampler,
    classify,
    discover_browser_tree,
    discover_with_psutil,
    find_browser_tree,
    parse_cmdline,
    parse_smaps_rollup,
    parse_statm_rss,
    read_tree,
)

MiB = 2**20

# Command lines captured from Playwright 1.65 launching Debian's Chromium 156 with
# executable_path="/usr/bin/chromium", args=["--disable-gpu"] (long flag lists shortened).
# Children of the zygote rewrite their argv as one space-joined string, so psutil splits
# "--enable-crash-reporter=,built on Debian GNU/Linux 12 (bookworm)" at its spaces.
DRIVER = ["/work/main/.venv/lib/python3.11/site-packages/playwright/driver/node",
          "/work/main/.venv/lib/python3.11/site-packages/playwright/driver/package/cli.js", "run-driver"]
PROFILE = "--user-data-dir=/tmp/playwright_chromiumdev_profile-t6We9m"
CRASH_REPORTER = ["--crashpad-handler-pid=0", "--enable-crash-reporter=,built", "on", "Debian", "GNU/Linux", "12", "(bookworm)"]
SHARED = [*CRASH_REPORTER, "--noerrdialogs", PROFILE, "--change-stack-guard-on-fork=enable",
          "--field-trial-handle=3,i,7855760845595594685,829189376976040270,262144", "--variations-seed-version"]
BROWSER = ["/usr/lib/chromium/chromium", "--show-component-extension-options", "--enable-gpu-rasterization",
           "--no-default-browser-check", "--disable-field-trial-config", "--disable-background-networking",
           "--disable-breakpad", "--disable-dev-shm-usage", "--headless", "--hide-scrollbars", "--mute-audio",
           "--no-sandbox", "--disable-gpu", PROFILE, "--remote-debugging-pipe", "--no-startup-window"]
ZYGOTE = ["/usr/lib/chromium/chromium", "--type=zygote", "--no-zygote-sandbox", "--no-sandbox", "--headless", *SHARED,
          "--no-first-run", "--ozone-platform=headless", "--ozone-override-screen-size=800,600"]
GPU = ["/usr/lib/chromium/chromium", "--type=gpu-process", "--gpu-recent-crash-count=0", "--no-sandbox",
       "--enable-gpu-rasterization", "--headless", "--use-angle=swiftshader-webgl", *SHARED, "--shared-files"]
NETWORK = ["/usr/lib/chromium/chromium", "--type=utility", "--utility-sub-type=network.mojom.NetworkService",
           "--lang=en-US", "--service-sandbox-type=none", "--no-sandbox", *SHARED,
           "--shared-files=v8_context_snapshot_data:100"]
STORAGE = ["/usr/lib/chromium/chromium", "--type=utility", "--utility-sub-type=storage.mojom.StorageService",
           "--lang=en-US", "--service-sandbox-type=utility", "--no-sandbox", *SHARED]
RENDERER = ["/usr/lib/chromium/chromium", "--type=renderer", *SHARED, "--no-sandbox", "--disable-back-forward-cache",
            "--remote-debugging-pipe", "--ozone-platform=headless", "--disable-gpu-compositing", "--lang=en-US",
            "--num-raster-threads=1", "--renderer-client-id=7", "--launch-time-ticks=8460458613",
            "--shared-files=v8_context_snapshot_data:100"]
WEBUI_RENDERER = ["/usr/lib/chromium/chromium", "--type=renderer", "--top-chrome-webui", *SHARED, "--renderer-client-id=5"]
HEADLESS_SHELL = ["/root/.cache/ms-playwright/chromium_headless_shell-1187/chrome-linux/headless_shell",
                  "--disable-field-trial-config", "--headless", "--no-sandbox", "--remote-debugging-pipe"]
CRASHPAD = ["/opt/google/chrome/chrome_crashpad_handler", "--monitor-self-annotation=ptype=crashpad-handler",
            "--database=/tmp/crashpad", "--initial-client-fd=5", "--shared-client-connection"]
FIXTURE_SITE = ["/work/main/.venv/bin/python", "-u", "-m", "fixture_sites", "--port", "0"]
XDIST_WORKER = ["/work/main/.venv/bin/python", "-u", "-c", "import sys;exec(eval(sys.stdin.readline()))"]


@pytest.mark.parametrize(
    ("name", "cmdline", "kind"),
    [
        ("node-MainThread", DRIVER, "driver"),
        ("node", ["node", "/x/playwright/driver/package/cli.js", "run-driver"], "driver"),
        ("chromium", BROWSER, "browser"),
        ("chromium", ZYGOTE, "zygote"),
        ("chromium", GPU, "gpu"),
        ("chromium", NETWORK, "utility"),
        ("exe", NETWORK, "utility"),  # the name while Chromium re-executes /proc/self/exe
        ("chromium", STORAGE, "utility"),
        ("chromium", RENDERER, "renderer"),
        ("chromium", WEBUI_RENDERER, "renderer"),
        ("chrome", ["/opt/google/chrome/chrome", "--type=broker"], "broker"),
        ("chrome", ["/opt/google/chrome/chrome", "--type=crashpad-handler", "--database=/tmp/c"], "crashpad"),
        ("headless_shell", HEADLESS_SHELL, "browser"),
        ("headless_shell", [HEADLESS_SHELL[0], "--type=renderer", "--no-sandbox"], "renderer"),
        ("chrome-headless", ["/ms-playwright/chrome-headless-shell", "--headless"], "browser"),
        ("chrome-headless", ["/odd path/with spaces/chrome-headless-shell", "--type=renderer"], "renderer"),
        ("chrome_crashpad", CRASHPAD, "crashpad"),
        ("chrome_crashpad", ["chrome_crashpad_handler"], "crashpad"),
    ],
)
def test_classify_names_the_kind_of_each_browser_process(name: str, cmdline: list[str], kind: str) -> None:
    assert classify(name, cmdline) == kind


@pytest.mark.parametrize(
    ("name", "cmdline"),
    [
        ("python", FIXTURE_SITE),
        ("python", XDIST_WORKER),
        ("python3.11", ["/usr/bin/python3.11", "-m", "pytest", "tests/test_browsertree.py"]),
        ("node", ["node", "server.js"]),  # a node process that is not Playwright's driver
        ("sh", ["/bin/sh", "/usr/bin/chromium", "--headless"]),  # a wrapper script, not the browser
        ("chromium", []),  # a zombie: no cmdline to tell it by
        ("kworker/0:1", []),
        ("", [""]),
    ],
)
def test_classify_rejects_processes_that_are_not_part_of_a_browser(name: str, cmdline: list[str]) -> None:
    assert classify(name, cmdline) is None


@given(st.text(max_size=20), st.lists(st.text(max_size=40), max_size=6))
def test_classify_never_raises(name: str, cmdline: list[str]) -> None:
    kind = classify(name, cmdline)
    assert kind is None or (isinstance(kind, str) and kind)


# /proc/<pid>/smaps_rollup of a Chromium 156 renderer with one small page.
RENDERER_SMAPS_ROLLUP = """\
00010000-7ffd74544000 ---p 00000000 00:00 0                              [rollup]
Rss:               77504 kB
Pss:               14279 kB
Pss_Dirty:          9112 kB
Pss_Anon:           8991 kB
Pss_File:           5165 kB
Pss_Shmem:           121 kB
Shared_Clean:      56748 kB
Shared_Dirty:      14620 kB
Private_Clean:         0 kB
Private_Dirty:      6136 kB
Referenced:        64524 kB
Anonymous:         20552 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
"""
# ...and the same renderer's statm: size resident shared text lib data dt (pages); 1.4 TiB reserved.
RENDERER_STATM = "379567682 19376 14238 57631 0 155108 0\n"


def test_smaps_rollup_parser_reads_rss_pss_and_private_pages_as_uss() -> None:
    figures = parse_smaps_rollup(RENDERER_SMAPS_ROLLUP)
    assert figures is not None
    assert figures.rss_bytes == 77504 * 1024
    assert figures.pss_bytes == 14279 * 1024
    assert figures.uss_bytes == (0 + 6136) * 1024
    assert figures.pss_anon_bytes == 8991 * 1024
    assert parse_smaps_rollup(RENDERER_SMAPS_ROLLUP.encode()) == figures


def test_smaps_rollup_parser_returns_none_for_an_exited_process() -> None:
    assert parse_smaps_rollup("") is None
    assert parse_smaps_rollup(b"") is None


def test_smaps_rollup_parser_takes_private_clean_into_uss() -> None:
    figures = parse_smaps_rollup("Rss: 30 kB\nPss: 20 kB\nPrivate_Clean: 4 kB\nPrivate_Dirty: 6 kB\n")
    assert figures is not None
    assert (figures.rss_bytes, figures.pss_bytes, figures.uss_bytes) == (30 * 1024, 20 * 1024, 10 * 1024)
    assert figures.pss_anon_bytes is None  # a kernel before 5.8 has no Pss_Anon


@given(st.text(max_size=200))
def test_smaps_rollup_parser_never_raises_on_garbage(text: str) -> None:
    figures = parse_smaps_rollup(text)
    assert figures is None or min(figures.rss_bytes, figures.pss_bytes, figures.uss_bytes) >= 0


def test_statm_parser_reads_resident_pages() -> None:
    assert parse_statm_rss(RENDERER_STATM) == 19376 * os.sysconf("SC_PAGE_SIZE")
    assert parse_statm_rss(b"") is None
    assert parse_statm_rss("12 x") is None


def test_read_tree_of_this_process_agrees_with_psutil() -> None:
    pid = os.getpid()
    detail = read_tree([pid], kinds={pid: "other"})
    rss_only = read_tree([pid], detail=False)
    full = psutil.Process().memory_full_info()
    (process,) = detail.processes
    assert process.kind == "other"  # classify() rejects pytest; read_tree names it "other"
    assert detail.pss_bytes is not None and detail.uss_bytes is not None
    assert abs(detail.pss_bytes - full.pss) < 16 * MiB
    assert abs(detail.uss_bytes - full.uss) < 16 * MiB
    assert rss_only.pss_bytes is None and rss_only.uss_bytes is None and not rss_only.detail
    assert abs(rss_only.rss_bytes - detail.rss_bytes) < 16 * MiB
    assert detail.by_kind() == {"other": detail.pss_bytes}
    assert rss_only.by_kind() == {"other": rss_only.rss_bytes}
    assert detail.to_json()["processes"][0]["pid"] == pid


def test_read_tree_skips_vanished_processes_silently() -> None:
    child = psutil.Popen(["sleep", "0"])
    child.wait()
    assert read_tree([child.pid]).processes == ()
    assert read_tree([child.pid], detail=False).rss_bytes == 0


def test_find_browser_tree_ignores_children_that_are_not_browsers() -> None:
    child = _sleeper()
    try:
        assert child.pid not in find_browser_tree()
        assert discover_browser_tree(child.pid) == {}
    finally:
        child.kill()
        child.wait()


def test_a_process_read_mid_exec_is_classified_again_once_its_command_line_is_there(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Debian's /usr/bin/chromium is a shell script that execs /usr/lib/chromium/chromium: the name (comm) reads
    # "chromium" before and after, and between the two the kernel gives an empty command line. Kept as "not a
    # browser" under an unchanged name, the browser was read as "other" for the whole crawl (a CI run on Chromium 156).
    from pytest_crawlmem.browser import tree as browsertree

    link = tmp_path / "chromium"
    link.symlink_to(shutil.which("sleep") or "/bin/sleep")
    child = subprocess.Popen([str(link), "60"])
    real_read = browsertree._read_proc_quietly
    mid_exec = {child.pid}

    def read(pid: int, name: str) -> bytes | None:
        if name == "cmdline" and pid in mid_exec:
            mid_exec.discard(pid)
            return b""
        return real_read(pid, name)

    monkeypatch.setattr(browsertree, "_read_proc_quietly", read)
    known: dict[int, tuple[bytes, str | None]] = {}
    try:
        _wait_for_comm(child.pid, b"chromium\n")
        deadline = time.monotonic() + 10
        while mid_exec:  # the walk that first reads it (a loaded machine's children file can miss a fresh child once)
            assert child.pid not in discover_browser_tree(known=known)  # mid exec: nothing tells what it is yet
            assert time.monotonic() < deadline, "the walk never read the child"
            time.sleep(0.01)
        assert discover_browser_tree(known=known).get(child.pid) == "browser"
    finally:
        child.kill()
        child.wait()


def _wait_for_comm(pid: int, comm: bytes) -> None:
    deadline = time.monotonic() + 10
    while psutil.Process(pid).name() + "\n" != comm.decode():
        assert time.monotonic() < deadline, f"process {pid} never took the name {comm!r}"
        time.sleep(0.01)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_tree_sampler_reads_pss_and_rescans_on_schedule() -> None:
    clock = FakeClock()
    scans: list[float] = []

    def discover(root: int | None) -> dict[int, str]:
        scans.append(clock.now)
        return {os.getpid(): "browser"}

    sampler = TreeSampler(rescan_seconds=2.0, detail_seconds=1.0, clock=clock, discover=discover)
    kinds_read = []
    for now in (0.0, 0.1, 0.5, 1.0, 1.5, 2.0, 2.1):
        clock.now = now
        kinds_read.append(sampler.sample().detail)
    assert kinds_read == [True, False, False, True, False, True, False]
    assert scans == [0.0, 2.0]
    assert (sampler.samples, sampler.detail_samples, sampler.rescans) == (7, 3, 2)
    assert sampler.peak_rss_bytes > 0 and sampler.peak_pss_bytes > 0
    assert sampler.last_detail is not None and sampler.last_detail.processes[0].kind == "browser"
    assert sampler.to_json()["detail_samples"] == 3


def _reading(*processes: tuple[int, int, int | None]) -> TreeReading:
    procs = tuple(BrowserProcess(pid, "renderer", rss, pss, pss) for pid, rss, pss in processes)
    detail = all(p.pss_bytes is not None for p in procs)
    pss = sum(p.pss_bytes or 0 for p in procs) if detail else None
    return TreeReading(procs, sum(p.rss_bytes for p in procs), pss, pss, 0.0)


def test_tree_sampler_estimates_the_pss_peak_between_detail_reads() -> None:
    sampler = TreeSampler(discover=lambda root: {})
    sampler.record(_reading((1, 100 * MiB, 30 * MiB), (2, 100 * MiB, 30 * MiB)))
    assert (sampler.peak_pss_bytes, sampler.peak_pss_estimated) == (60 * MiB, False)
    # Process 1 grows by 50 MiB of private memory, process 3 appears (a renderer: counted at the renderers' PSS/RSS
    # ratio of the last detail reading, 0.3, when its own PSS is not read).
    sampler.record(_reading((1, 150 * MiB, None), (2, 100 * MiB, None), (3, 80 * MiB, None)))
    assert (sampler.peak_pss_bytes, sampler.peak_pss_estimated) == ((80 + 30) * MiB + int(80 * MiB * 0.3), True)
    assert sampler.peak_rss_bytes == 330 * MiB
    # A lower measured PSS does not lower the peak; reset_peaks starts a new window.
    sampler.record(_reading((1, 150 * MiB, 70 * MiB), (2, 100 * MiB, 25 * MiB)))
    assert sampler.peak_pss_bytes == (80 + 30) * MiB + int(80 * MiB * 0.3)
    sampler.reset_peaks()
    assert (sampler.peak_pss_bytes, sampler.peak_rss_bytes) == (0, 0)


def _sleeper() -> psutil.Popen:
    """A `sleep` child that has finished exec and loading libc (its memory no longer moves)."""
    child = psutil.Popen(["sleep", "5"])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if child.name() == "sleep" and child.status() == psutil.STATUS_SLEEPING:
            break
        time.sleep(0.01)
    return child


def test_tree_sampler_reads_the_pss_of_a_process_first_seen_between_detail_reads() -> None:
    child = _sleeper()
    try:
        tree = {os.getpid(): "browser"}
        sampler = TreeSampler(rescan_seconds=0.0, detail_seconds=3600.0, discover=lambda root: dict(tree))
        assert sampler.sample().detail
        tree[child.pid] = "renderer"
        reading = sampler.sample()
        assert not reading.detail and {p.pid for p in reading.processes} == {os.getpid(), child.pid}
        assert sampler.detail_samples == 1
        (sleeper,) = (p for p in reading.processes if p.pid == child.pid)
        child_pss = read_tree([child.pid]).pss_bytes or 0
        # Without the shared part's thinning by process count, which a reading of a subset of the tree would change.
        estimate_without_child = sampler.estimate_pss_bytes(TreeReading(reading.processes[:1], 0, None, None, 0.0),
                                                            split_shared=False)
        counted = sampler.estimate_pss_bytes(reading, split_shared=False) - estimate_without_child
        # Its PSS, read once (libc's share moves as processes come and go), not its RSS (~8x).
        assert abs(counted - child_pss) < 256 * 1024
        assert counted < sleeper.rss_bytes / 2
    finally:
        child.kill()
        child.wait()


# --- a real Chromium tree ---------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else shutil.which("chromium")
BASE_PAGES = 3
BIG_PAGES = 5
BIG_ARRAY_BYTES = 50 * MiB
PAGE_HTML = "<html><body><h1>Catalog</h1><ul>{items}</ul></body></html>".format(
    items="".join(f"<li><a href='/product/{i}'>Product {i}</a> <p>{'lorem ipsum ' * 20}</p></li>" for i in range(300))
)
ALLOCATE = f"() => {{ const a = new Float64Array({BIG_ARRAY_BYTES // 8}); a.fill(Math.PI); window.big = a; return a.length }}"


@dataclass
class Scenario:
    """What one real Playwright session showed: readings at each step."""

    base: TreeReading
    base_kinds: dict[int, str]
    loaded: TreeReading
    closed: TreeReading
    sampler: TreeSampler
    estimated_peak_pss_bytes: int
    pids: set[int] = field(default_factory=set)
    left_over: list[int] = field(default_factory=list)
    tree_after: list[int] = field(default_factory=list)
    walks: tuple[dict[int, str], ...] = ()  # the tree walked down its children files, before and after psutil's
    psutil_kinds: dict[int, str] = field(default_factory=dict)  # the same tree found through psutil's parent links


def _detail(kinds: dict[int, str]) -> TreeReading:
    return read_tree(kinds, kinds=kinds)


async def _run_scenario() -> Scenario:
    from playwright.async_api import async_playwright

    pids: set[int] = set()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--disable-gpu"])
        try:
            context = await browser.new_context()
            for _ in range(BASE_PAGES):
                page = await context.new_page()
                await page.set_content(PAGE_HTML)
            base_kinds = discover_browser_tree()
            pids |= _remember(base_kinds)
            base = _detail(base_kinds)
            sampler = TreeSampler(detail_seconds=3600.0, rescan_seconds=0.0)
            sampler.sample()  # a detail reading: the base of the estimates
            big_pages = []
            for _ in range(BIG_PAGES):
                page = await context.new_page()
                await page.set_content(PAGE_HTML)
                assert await page.evaluate(ALLOCATE) == BIG_ARRAY_BYTES // 8
                big_pages.append(page)
            sampler.sample()  # RSS only: the peak is estimated ...
            loaded_kinds = discover_browser_tree()
            loaded = _detail(loaded_kinds)
            sampler.sample()  # ... on both sides of the measured reading (the tree may still grow: a CI run read
            estimated = sampler.peak_pss_bytes  # 980 MB a moment after an estimate of 842 MB, when this came last)
            psutil_kinds = discover_with_psutil()
            walked_after = discover_browser_tree()  # a renderer may come or go in between: one of the two walks agrees
            pids |= _remember(loaded_kinds) | _remember(walked_after)
            for page in big_pages:
                await page.close()
            closed = await _wait_for_uss_below(loaded.uss_bytes or 0, drop_bytes=BIG_PAGES * BIG_ARRAY_BYTES * 4 // 5)
            pids |= _remember({p.pid: p.kind for p in closed.processes})
        finally:
            await browser.close()
    _gone, alive = psutil.wait_procs([_PROCESSES[pid] for pid in pids], timeout=5)
    return Scenario(base=base, base_kinds=base_kinds, loaded=loaded, walks=(loaded_kinds, walked_after),
                    psutil_kinds=psutil_kinds,
                    closed=closed, sampler=sampler,
                    estimated_peak_pss_bytes=estimated, pids=pids, left_over=[p.pid for p in alive],
                    tree_after=find_browser_tree())


async def _wait_for_uss_below(loaded_uss_bytes: int, *, drop_bytes: int, timeout_seconds: float = 5.0) -> TreeReading:
    """Renderers of closed pages exit shortly after: read until USS dropped or time is up."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        reading = _detail(discover_browser_tree())
        if (reading.uss_bytes or 0) < loaded_uss_bytes - drop_bytes or time.monotonic() > deadline:
            return reading
        await asyncio.sleep(0.1)


_PROCESSES: dict[int, psutil.Process] = {}


def _remember(kinds: dict[int, str]) -> set[int]:
    """Keep a psutil handle of each browser pid as soon as it is seen: a reused pid is not mistaken for it."""
    for pid in kinds:
        if pid not in _PROCESSES:
            try:
                _PROCESSES[pid] = psutil.Process(pid)
            except psutil.NoSuchProcess:
                continue
    return {pid for pid in kinds if pid in _PROCESSES}


def _run_in_own_thread(main: Callable[[], Coroutine[Any, Any, Scenario]]) -> Scenario:
    """Run ``main`` under asyncio.run in a thread: pytest-twisted already runs an asyncio loop here."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result(timeout=120)


@pytest.fixture(scope="module")
def scenario() -> Any:
    pytest.importorskip("playwright.async_api", reason="playwright is not installed")
    if CHROMIUM is None:
        pytest.skip("no Chromium: neither /usr/bin/chromium nor `chromium` on PATH")
    result = _run_in_own_thread(_run_scenario)
    yield result
    for pid in result.left_over:  # only browser processes this module started
        if _PROCESSES[pid].is_running():
            _PROCESSES[pid].kill()


def test_walking_the_children_files_finds_the_tree_psutil_finds(scenario: Scenario) -> None:
    assert scenario.psutil_kinds in scenario.walks, (scenario.psutil_kinds, scenario.walks)
    assert "renderer" in scenario.psutil_kinds.values()


def test_a_cmdline_rewritten_as_one_string_is_split_at_its_spaces_as_psutil_does() -> None:
    assert parse_cmdline(b"/usr/lib/chromium/chromium --type=renderer --lang=en-US") == [
        "/usr/lib/chromium/chromium", "--type=renderer", "--lang=en-US"]
    assert parse_cmdline(b"node\0cli.js\0run-driver\0") == ["node", "cli.js", "run-driver"]
    assert parse_cmdline(b"chromium --type=zygote\0") == ["chromium", "--type=zygote"]
    assert parse_cmdline(b"") == []


def test_real_tree_has_driver_browser_and_renderers(scenario: Scenario) -> None:
    kinds = set(scenario.base_kinds.values())
    assert {"driver", "browser", "renderer"} <= kinds, kinds
    assert os.getpid() not in scenario.base_kinds
    counts = scenario.loaded.count_by_kind()
    assert counts["driver"] == 1 and counts["browser"] == 1
    assert counts["renderer"] >= scenario.base.count_by_kind()["renderer"] + 1


def test_real_tree_pss_sum_is_well_below_rss_sum(scenario: Scenario) -> None:
    for reading in (scenario.base, scenario.loaded, scenario.closed):
        assert reading.pss_bytes is not None and reading.uss_bytes is not None
        assert reading.uss_bytes <= reading.pss_bytes < reading.rss_bytes
    # Shared pages (the binary, the zygote's copy-on-write heap) counted once per process.
    assert scenario.base.rss_bytes > 1.5 * (scenario.base.pss_bytes or 0)
    assert sum(scenario.base.by_kind().values()) == scenario.base.pss_bytes


def test_real_tree_pss_grows_with_five_pages_holding_big_arrays(scenario: Scenario) -> None:
    growth = (scenario.loaded.pss_bytes or 0) - (scenario.base.pss_bytes or 0)
    assert growth > BIG_PAGES * BIG_ARRAY_BYTES * 0.9, f"PSS grew {growth / MiB:.0f} MiB"
    renderer_growth = scenario.loaded.by_kind()["renderer"] - scenario.base.by_kind()["renderer"]
    assert renderer_growth > BIG_PAGES * BIG_ARRAY_BYTES * 0.9
    if scenario.base.pss_anon_bytes is not None:  # Linux 5.8+: the arrays are anonymous memory
        anon_growth = (scenario.loaded.pss_anon_bytes or 0) - scenario.base.pss_anon_bytes
        assert anon_growth > BIG_PAGES * BIG_ARRAY_BYTES * 0.9, f"Pss_Anon grew {anon_growth / MiB:.0f} MiB"


def test_real_tree_uss_drops_after_closing_the_big_pages(scenario: Scenario) -> None:
    drop = (scenario.loaded.uss_bytes or 0) - (scenario.closed.uss_bytes or 0)
    assert drop > BIG_PAGES * BIG_ARRAY_BYTES * 0.8, f"USS dropped {drop / MiB:.0f} MiB"
    # Back near the base, judged on renderers: the driver's and the browser's USS also move
    # when another Chromium or Playwright on the machine starts or stops mapping the same files.
    base, closed = _uss_of(scenario.base, "renderer"), _uss_of(scenario.closed, "renderer")
    assert closed < base + 100 * MiB, f"renderer USS {base / MiB:.0f} MiB before, {closed / MiB:.0f} MiB after"


def _uss_of(reading: TreeReading, kind: str) -> int:
    return sum(p.uss_bytes or 0 for p in reading.processes if p.kind == kind)


def test_real_tree_sampler_estimate_does_not_miss_the_pss_peak(scenario: Scenario) -> None:
    assert scenario.sampler.peak_pss_estimated
    if scenario.base.pss_anon_bytes is None or scenario.loaded.pss_anon_bytes is None:
        pytest.skip("no Pss_Anon in smaps_rollup (Linux before 5.8)")
    # Judged on the growth since the base reading: PSS splits the pages of the Chromium binary among every process
    # that maps them, another Chromium's on the machine too (the other xdist worker's browser tests), so one that
    # exited between the base and the loaded reading raised this tree's PSS by ~100-150 MiB that no RSS reading sees
    # (a suite run estimated 800 MiB of a 909 MiB tree; alone, 948-963 MiB of 910-919). The anonymous growth (the
    # arrays, the renderers' heaps) is this tree's own.
    grown = scenario.estimated_peak_pss_bytes - (scenario.base.pss_bytes or 0)
    anonymous = scenario.loaded.pss_anon_bytes - scenario.base.pss_anon_bytes
    # Existing processes count PSS + RSS growth, new renderers had their PSS read once: ~1.2x the anonymous growth
    # here (the new renderers' shared pages count too), where counting new renderers at their RSS gave ~1.6x the
    # whole tree's PSS (and summed RSS is ~2.5x).
    assert 0.9 * anonymous <= grown <= 1.4 * anonymous, (grown / MiB, anonymous / MiB)


def test_no_browser_process_is_left_after_the_browser_closes(scenario: Scenario) -> None:
    assert scenario.pids, "the scenario saw no browser process"
    assert scenario.left_over == []
    assert scenario.tree_after == []
    assert not [pid for pid in scenario.pids if _PROCESSES[pid].is_running()]


def _process(pid: int, rss: int, shared: int, pss: int | None = None, pss_anon: int | None = None) -> BrowserProcess:
    return BrowserProcess(pid, "renderer", rss * MiB, None if pss is None else pss * MiB, None,
                          None if pss_anon is None else pss_anon * MiB, shared * MiB)


def _split_reading(*processes: BrowserProcess) -> TreeReading:
    detail = processes[0].pss_bytes is not None
    return TreeReading(processes, sum(p.rss_bytes for p in processes),
                       sum(p.pss_bytes or 0 for p in processes) if detail else None, None, 0.0,
                       pss_anon_bytes=sum(p.pss_anon_bytes or 0 for p in processes) if detail else None)


def test_the_pss_estimate_counts_shared_growth_at_the_process_share_and_thins_it_as_processes_come() -> None:
    sampler = TreeSampler(rescan_seconds=3600.0, detail_seconds=3600.0, discover=lambda root: {})
    # Two renderers: 100 MiB resident, 60 of it shared (file and shmem), PSS 50 of which 40 anonymous (so the
    # 60 MiB shared count 10 MiB: a share of 1/6).
    sampler.record(_split_reading(_process(1, 100, 60, 50, 40), _process(2, 100, 60, 50, 40)))
    grown = _split_reading(_process(1, 132, 72), _process(2, 100, 60))  # 20 MiB anonymous and 12 MiB shared more
    assert sampler.estimate_pss_bytes(grown) == pytest.approx((40 + 20 + 10 + 12 / 6 + 50) * MiB, abs=2)
    assert sampler.estimate_pss_bytes(grown, split_shared=False) == (50 + 32 + 50) * MiB  # the estimate before
    # A third renderer: it counts at its kind's anonymous (40/40) and shared (10/60) ratios, and every renderer's
    # shared part is now split three ways instead of two.
    third = _split_reading(_process(1, 132, 72), _process(2, 100, 60), _process(3, 90, 60))
    thin = 2 / 3
    expected = (40 + 20 + thin * 12) + (40 + thin * 10) + (30 + thin * 60 / 6)
    assert sampler.estimate_pss_bytes(third) == pytest.approx(expected * MiB, abs=4)

    # Processes gone do not swell the shares of those left (a 17-process tree down to 8 once doubled every share).
    gone = _split_reading(_process(1, 100, 60))
    assert sampler.estimate_pss_bytes(gone) == 50 * MiB


def test_tree_sampler_drops_an_exited_process_without_rediscovering_and_a_detail_reading_rediscovers() -> None:
    # renderers exit as pages close: rediscovering the tree then (the children file of every thread of the crawl
    # process, the driver, the browser and the zygotes) made it nearly every reading, 60% of the tree's cost
    clock = FakeClock()
    child = _sleeper()
    scans: list[float] = []
    tree = {os.getpid(): "browser", child.pid: "renderer"}

    def discover(root: int | None) -> dict[int, str]:
        scans.append(clock.now)
        return dict(tree)

    try:
        sampler = TreeSampler(rescan_seconds=10.0, detail_seconds=3600.0, clock=clock, discover=discover)
        assert len(sampler.sample().processes) == 2
        child.kill()
        child.wait(5)
        del tree[child.pid]
        clock.now = 1.0
        assert [p.pid for p in sampler.sample().processes] == [os.getpid()]
        clock.now = 2.0
        sampler.sample()
        assert scans == [0.0] and sampler.kinds == {os.getpid(): "browser"}
        clock.now = 3.0
        assert sampler.sample(detail=True).detail  # a checkpoint's reading sees the tree as it is now
        clock.now = 12.0
        sampler.sample()
        clock.now = 13.0
        sampler.sample()
        assert scans == [0.0, 3.0, 13.0]  # the schedule runs from the last rediscovery
    finally:
        if child.is_running():
            child.kill()


def test_a_tree_without_its_browser_yet_is_looked_for_again_soon_not_at_the_next_scheduled_rediscovery() -> None:
    # the crawl's tree is read before Chromium has launched: waiting the 10 s schedule to look again left a 100-page
    # browser crawl with no PSS reading in any sample
    clock = FakeClock()
    tree: dict[int, str] = {}
    sampler = TreeSampler(rescan_seconds=10.0, detail_seconds=3600.0, clock=clock, discover=lambda root: dict(tree))
    sampler.sample()
    tree.update({os.getpid(): "driver"})  # the driver first, then the browser
    clock.now = 1.0
    sampler.sample()
    tree.update({os.getppid(): "browser"})
    clock.now = 2.0
    assert sampler.sample().processes and "browser" in sampler.kinds.values()
    scans = sampler.rescans
    clock.now = 3.0
    sampler.sample()
    assert sampler.rescans == scans  # found: the schedule's 10 s again


async def _renderers_of_a_new_context() -> tuple[set[int], set[int], set[int]]:
    """A sampler watching forks and one not, both rescanned with one context open; two more contexts' pages then
    fork renderers: what each one's RSS reading holds, and the renderers new since (this process's tree only)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=["--disable-gpu"])
        try:
            page = await (await browser.new_context()).new_page()
            await page.set_content(PAGE_HTML)
            watching = TreeSampler(detail_seconds=3600.0, rescan_seconds=3600.0, watch_forks=True)
            blind = TreeSampler(detail_seconds=3600.0, rescan_seconds=3600.0)
            watching.sample()
            blind.sample()
            before = {pid for pid, kind in discover_browser_tree().items() if kind == "renderer"}
            for _ in range(2):  # other contexts: other renderers (two: a spare renderer Chromium keeps may serve one)
                other = await (await browser.new_context()).new_page()
                await other.set_content(PAGE_HTML)
            new = {pid for pid, kind in discover_browser_tree().items() if kind == "renderer"} - before
            seen = {p.pid for p in watching.sample(detail=False, read_new=False).processes}
            unseen = {p.pid for p in blind.sample(detail=False, read_new=False).processes}
            return new, seen, unseen
        finally:
            await browser.close()


def test_a_sampler_watching_forks_reads_a_new_contexts_renderer_before_its_next_rescan() -> None:
    # the governor's browser lever reads RSS between rescans 10 s apart: it missed the renderers of a rotated
    # context's pages, and its estimates read 80-200 MiB under the tree's PSS (rotations came at 750-885 MiB, not 653)
    pytest.importorskip("playwright.async_api", reason="playwright is not installed")
    if CHROMIUM is None:
        pytest.skip("no Chromium: neither /usr/bin/chromium nor `chromium` on PATH")
    new, seen, unseen = _run_in_own_thread(_renderers_of_a_new_context)
    assert new, "the other contexts' pages forked no renderer"
    assert new <= seen
    assert not new & unseen  # without the watch, the rescan schedule decides when it is seen
