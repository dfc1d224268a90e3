"""Memory of a browser process tree (Playwright's driver, Chromium and its children).

Summing RSS over a Chromium tree counts the pages its processes share (the binary, the
zygote's copy-on-write heap, shared memory) once per process, 2-5 times over; the
footprint is the summed PSS. PSS and USS also drop when another browser on the machine
maps the same binary (an xdist worker, a parallel job); the anonymous part of PSS
(``Pss_Anon``: heaps, JS arrays) does not, so it is the steadiest figure for growth.
They come from ``/proc/<pid>/smaps_rollup``, which walks every resident page: ~25 ms
CPU per GiB of summed RSS (~3 ms per Chromium process, 70-95 ms for a 20-page tree).
RSS alone comes from ``/proc/<pid>/statm`` (~10 us per process), cheap enough to poll.
Chromium's two crashpad handlers detach to init (setsid, reparented to pid 1): they are
not in the tree, and hold under 1 MB PSS each.

All numbers are in bytes, all times in seconds. Pure stdlib + psutil; runs in the
process that started the browser (the crawl process), usually on its sampler thread.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

__all__ = [
    "BrowserProcess",
    "RollupFigures",
    "TreeReading",
    "TreeSampler",
    "classify",
    "discover_browser_tree",
    "find_browser_tree",
    "parse_smaps_rollup",
    "parse_statm_rss",
    "read_tree",
]

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_HAVE_PROC = os.path.isdir("/proc/self")

#: Executable names of the Chromium family as Playwright launches them.
BROWSER_EXECUTABLES = frozenset(
    {
        "chromium",
        "chromium-browser",
        "chrome",
        "google-chrome",
        "google-chrome-stable",
        "google-chrome-beta",
        "google-chrome-unstable",
        "chrome-headless-shell",
        "headless_shell",
        "msedge",
        "microsoft-edge",
        "microsoft-edge-stable",
    }
)
_CRASHPAD = "chrome_crashpad_handler"
_COMM_LENGTH = 15  # the kernel truncates /proc/<pid>/comm to 15 characters
#: ``--type=`` values renamed to a kind; every other value is its own kind.
_TYPE_KINDS = {"gpu-process": "gpu", "crashpad-handler": "crashpad"}
#: The kind of a process below a browser process that ``classify`` does not know.
OTHER_KIND = "other"


@dataclass(frozen=True, slots=True)
class BrowserProcess:
    """One process of the tree: its kind and memory (PSS/USS are ``None`` on RSS-only reads).

    ``pss_anon_bytes`` is the anonymous part of PSS (``Pss_Anon``, Linux 5.8+): heaps and
    stacks, shared only by processes forked from one another, so unlike the file-backed
    part it does not drop when another browser on the machine maps the same binary.
    """

    pid: int
    kind: str
    rss_bytes: int
    pss_bytes: int | None
    uss_bytes: int | None
    pss_anon_bytes: int | None = None
    shared_bytes: int | None = None  # resident file-backed and shmem pages (statm's shared; smaps' Rss - Anonymous)

    def to_json(self) -> dict[str, Any]:
        """Return the process as a JSON-ready dict."""
        return {"pid": self.pid, "kind": self.kind, "rss_bytes": self.rss_bytes, "pss_bytes": self.pss_bytes,
                "uss_bytes": self.uss_bytes, "pss_anon_bytes": self.pss_anon_bytes}


@dataclass(frozen=True, slots=True)
class TreeReading:
    """One reading of the whole tree: per-process figures and their sums.

    ``rss_bytes`` double counts shared pages. ``pss_bytes`` is the footprint and
    ``uss_bytes`` the memory that would be freed if every process exited; both are
    ``None`` on an RSS-only (``detail=False``) reading. A process whose PSS could not be
    read (no permission) adds its RSS to ``pss_bytes`` and to ``uss_bytes``: an upper bound.
    PSS and USS of a tree drop when another tree maps the same files (a second browser, on
    another xdist worker or in another job): the binary's pages are then shared with it.
    ``pss_anon_bytes`` (summed ``Pss_Anon``; ``None`` before Linux 5.8) is immune to that.
    ``cost_seconds`` is the wall time of the reading, ``cpu_seconds`` the CPU time the
    reading thread spent (kernel time walking the mappings included).
    """

    processes: tuple[BrowserProcess, ...]
    rss_bytes: int
    pss_bytes: int | None
    uss_bytes: int | None
    cost_seconds: float
    cpu_seconds: float = 0.0
    pss_anon_bytes: int | None = None

    @property
    def detail(self) -> bool:
        """Whether this reading has PSS and USS."""
        return self.pss_bytes is not None

    def by_kind(self) -> dict[str, int]:
        """Return PSS (RSS where a process has no PSS) summed per kind."""
        totals: dict[str, int] = {}
        for process in self.processes:
            size = process.pss_bytes if process.pss_bytes is not None else process.rss_bytes
            totals[process.kind] = totals.get(process.kind, 0) + size
        return totals

    def count_by_kind(self) -> dict[str, int]:
        """Return the number of processes per kind."""
        counts: dict[str, int] = {}
        for process in self.processes:
            counts[process.kind] = counts.get(process.kind, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        """Return the reading as a JSON-ready dict (sizes in bytes, times in seconds)."""
        return {
            "rss_bytes": self.rss_bytes,
            "pss_bytes": self.pss_bytes,
            "uss_bytes": self.uss_bytes,
            "pss_anon_bytes": self.pss_anon_bytes,
            "process_count": len(self.processes),
            "by_kind": self.by_kind(),
            "count_by_kind": self.count_by_kind(),
            "cost_seconds": self.cost_seconds,
            "cpu_seconds": self.cpu_seconds,
            "processes": [process.to_json() for process in self.processes],
        }


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _is_browser_executable(name: str, executable: str) -> bool:
    if executable in BROWSER_EXECUTABLES or name in BROWSER_EXECUTABLES:
        return True
    # A name cut at the kernel's 15 characters ("chrome-headless" for chrome-headless-shell).
    return len(name) == _COMM_LENGTH and any(known.startswith(name) for known in BROWSER_EXECUTABLES)


def _is_playwright_driver(name: str, executable: str, cmdline: Sequence[str]) -> bool:
    if "run-driver" not in cmdline[1:]:
        return False
    # Node renames its main thread, so comm reads "node-MainThread"; argv[0] is .../driver/node.
    return executable.startswith("node") or name.startswith("node") or any(arg.endswith("cli.js") for arg in cmdline)


def classify(name: str, cmdline: Sequence[str]) -> str | None:
    """Return the kind of a process of a browser tree, or ``None`` for any other process (pure).

    Kinds: ``driver`` (Playwright's node driver), ``browser`` (a Chromium-family main
    process, no ``--type=``), ``crashpad``, and the ``--type=`` of a child (``renderer``,
    ``gpu`` for ``gpu-process``, ``utility``, ``zygote``, others as spelled). ``name`` is the
    process name (``/proc/<pid>/comm``, may be cut at 15 characters or read ``exe`` while
    Chromium re-executes itself); ``cmdline`` its argument vector (a zombie's is empty:
    ``None``, as nothing tells what it was).
    """
    if not cmdline:
        return None  # a zombie or a kernel thread: nothing to tell it by
    executable = _basename(cmdline[0])
    if _is_playwright_driver(name, executable, cmdline):
        return "driver"
    if _CRASHPAD in (executable, name) or (len(name) == _COMM_LENGTH and _CRASHPAD.startswith(name)):
        return "crashpad"
    if not _is_browser_executable(name, executable):
        return None
    for arg in cmdline[1:]:
        if arg.startswith("--type="):
            process_type = arg[len("--type="):]
            return _TYPE_KINDS.get(process_type, process_type) or "browser"
    return "browser"


def _process_kind(process: psutil.Process) -> str | None:
    try:
        with process.oneshot():
            return classify(process.name(), process.cmdline())
    except psutil.Error:
        return None


def discover_browser_tree(
    root_pid: int | None = None, known: dict[int, tuple[bytes, str | None]] | None = None,
) -> dict[int, str]:
    """Return ``{pid: kind}`` for the browser processes below ``root_pid`` (default: this process).

    A process is taken when ``classify`` accepts it, and so is every descendant of a taken
    process (as ``"other"`` when ``classify`` does not know it); the root itself is taken
    when it is a browser process. Parents come before their children. Walks the tree down from
    the root through ``/proc/<pid>/task/<tid>/children`` (the children of Chromium's leaf kinds,
    renderers, GPU and utility processes, are not read: they start none); without those files,
    reads /proc of every process on the machine (psutil). ``known`` (``{pid: (comm, kind or None)}``),
    kept by the caller from one call to the next, spares classifying a process again while its name
    is unchanged; it is updated in place (processes gone are dropped).
    """
    if _HAVE_CHILDREN:
        return _walk_tree(os.getpid() if root_pid is None else root_pid, root_pid is not None, known)
    return discover_with_psutil(root_pid)


def discover_with_psutil(root_pid: int | None = None) -> dict[int, str]:
    """:func:`discover_browser_tree` through psutil: reads /proc of every process on the machine for the parent links."""
    try:
        root = psutil.Process(root_pid) if root_pid is not None else psutil.Process()
        descendants = root.children(recursive=True)
    except psutil.Error:
        return {}
    found: dict[int, str] = {}
    root_kind = _process_kind(root) if root_pid is not None else None
    if root_kind is not None:
        found[root.pid] = root_kind
    for process in descendants:
        kind = _process_kind(process)
        if kind is None and _has_parent_in(process, found):
            kind = OTHER_KIND
        if kind is not None:
            found[process.pid] = kind
    return found


#: Whether this kernel lists each thread's children (CONFIG_PROC_CHILDREN, Linux 3.5+).
_HAVE_CHILDREN = os.path.exists(f"/proc/self/task/{os.getpid()}/children")
#: Kinds of Chromium process that start no process of their own: their children are not read.
_LEAF_KINDS = frozenset({"renderer", "gpu", "utility"})


def _children_of(pid: int) -> list[int]:
    """The children of ``pid`` (those of every thread of it); empty when it is gone."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb", buffering=0) as file:
                children.extend(int(field) for field in file.read().split())
        except (OSError, ValueError):
            continue  # the thread exited
    return children


#: Kinds a process can read as before it is what it becomes: the browser forks its children (read as ``browser``
#: until they exec), a zygote forks renderers (read as ``zygote`` until they rename themselves); read each time.
_PASSING_KINDS = frozenset({"browser", "zygote"})


def _kind_of(pid: int, known: dict[int, tuple[bytes, str | None]] | None) -> str | None:
    """The kind of ``pid``, kept in ``known`` with its name (``comm``): a process whose name is unchanged keeps its
    kind (an exec renames it: a forked Python becoming Playwright's driver), except the kinds that pass and a
    browser's name read before its command line was there."""
    comm = _read_proc_quietly(pid, "comm") if known is not None and _HAVE_PROC else None
    if known is not None and comm is not None:
        cached = known.get(pid)
        if cached is not None and cached[0] == comm:
            return cached[1]
    kind = _kind_of_pid(pid)
    found = None if kind == OTHER_KIND else kind
    if known is not None and comm is not None and found not in _PASSING_KINDS and not (
            found is None and _names_a_browser(comm)):
        known[pid] = (comm, found)
    return found


def _names_a_browser(comm: bytes) -> bool:
    """Whether a process name is a browser's: one that is not a browser yet is mid exec (Debian's ``chromium`` shell
    script becoming ``/usr/lib/chromium/chromium`` keeps its name, and the kernel gives an empty command line between),
    so it is not kept as "not a browser"."""
    name = comm.decode(errors="replace").strip()
    return _is_browser_executable(name, name)


def _walk_tree(root: int, take_root: bool, known: dict[int, tuple[bytes, str | None]] | None) -> dict[int, str]:
    """:func:`discover_browser_tree` through the children files, breadth first from ``root``."""
    found: dict[int, str] = {}
    seen: set[int] = set()
    pending = [(root, False)]  # (pid, under a taken process)
    while pending:
        pid, under_taken = pending.pop(0)
        seen.add(pid)
        kind = _kind_of(pid, known) if pid != root or take_root else None
        if kind is None and under_taken:
            kind = OTHER_KIND
        if kind is not None:
            found[pid] = kind
        if kind not in _LEAF_KINDS:
            pending.extend((child, kind is not None) for child in _children_of(pid))
    if known is not None:
        for pid in [pid for pid in known if pid not in seen]:
            del known[pid]
    return found


def _has_parent_in(process: psutil.Process, found: Mapping[int, str]) -> bool:
    try:
        return process.ppid() in found
    except psutil.Error:
        return False


def find_browser_tree(root_pid: int | None = None) -> list[int]:
    """Return the pids of the browser processes below ``root_pid`` (default: this process)."""
    return list(discover_browser_tree(root_pid))


def kill_browser(kinds: Mapping[int, str]) -> int:
    """SIGKILL the browser processes of a tree (``{pid: kind}``), never Playwright's driver; return how many died.

    The last step of a stop that nothing else could finish: Playwright's pending calls fail with the browser gone,
    and the crawl can close.
    """
    killed = 0
    for pid, kind in kinds.items():
        if kind == "driver":
            continue
        try:
            psutil.Process(pid).kill()
            killed += 1
        except psutil.Error:
            continue
    return killed


@dataclass(frozen=True, slots=True)
class RollupFigures:
    """RSS, PSS, USS and anonymous PSS (``None`` before Linux 5.8) of one process, in bytes."""

    rss_bytes: int
    pss_bytes: int
    uss_bytes: int
    pss_anon_bytes: int | None = None
    anon_bytes: int | None = None  # resident anonymous pages (``Anonymous``)


_ROLLUP_FIELDS = {b"Rss": 0, b"Pss": 1, b"Private_Clean": 2, b"Private_Dirty": 3, b"Pss_Anon": 4, b"Anonymous": 5}


def parse_smaps_rollup(text: str | bytes) -> RollupFigures | None:
    """Parse ``/proc/<pid>/smaps_rollup``; ``None`` when it holds no figures (a zombie, an exited process)."""
    data = text.encode() if isinstance(text, str) else text
    values = [0, 0, 0, 0, 0, 0]
    seen = 0
    has_anon = has_anonymous = False
    for line in data.splitlines():
        key, _, rest = line.partition(b":")
        index = _ROLLUP_FIELDS.get(key)
        if index is None:
            continue
        fields = rest.split()
        if not fields or not fields[0].isdigit():
            continue
        values[index] = int(fields[0]) * 1024  # always kB
        has_anon = has_anon or index == 4
        has_anonymous = has_anonymous or index == 5
        seen += 1
        if seen == len(_ROLLUP_FIELDS):
            break
    if seen == 0:
        return None
    return RollupFigures(rss_bytes=values[0], pss_bytes=values[1], uss_bytes=values[2] + values[3],
                         pss_anon_bytes=values[4] if has_anon else None, anon_bytes=values[5] if has_anonymous else None)


def parse_statm_rss(text: str | bytes) -> int | None:
    """Parse ``/proc/<pid>/statm`` into resident bytes; ``None`` when empty or malformed."""
    fields = text.split()
    if len(fields) < 2:
        return None
    try:
        return int(fields[1]) * _PAGE_SIZE
    except ValueError:
        return None


def parse_statm(text: str | bytes) -> tuple[int, int] | None:
    """Parse ``/proc/<pid>/statm`` into resident and resident shared (file-backed and shmem) bytes; ``None`` when
    empty or malformed."""
    fields = text.split()
    if len(fields) < 3:
        return None
    try:
        return int(fields[1]) * _PAGE_SIZE, int(fields[2]) * _PAGE_SIZE
    except ValueError:
        return None


def _read_proc(pid: int, name: str) -> bytes | None:
    """Read /proc/<pid>/<name>; ``None`` when the process is gone."""
    try:
        with open(f"/proc/{pid}/{name}", "rb", buffering=0) as file:
            return file.read()
    except (FileNotFoundError, ProcessLookupError):
        return None


def parse_cmdline(data: bytes) -> list[str]:
    """Parse ``/proc/<pid>/cmdline`` as psutil does: NUL-separated, or space-separated when the process rewrote its
    argument vector as one string (Chromium's children do: ``chromium --type=renderer ...``)."""
    if not data:
        return []
    sep = b"\0" if data.endswith(b"\0") else b" "
    args = data.removesuffix(sep).split(sep)
    if sep == b"\0" and len(args) == 1 and b" " in args[0]:
        args = args[0].split(b" ")
    return [arg.decode(errors="replace") for arg in args]


def _read_proc_quietly(pid: int, name: str) -> bytes | None:
    """Read /proc/<pid>/<name>; ``None`` when it cannot be read (gone, not allowed)."""
    try:
        return _read_proc(pid, name)
    except OSError:
        return None


def _read_rss_psutil(pid: int) -> int | None:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return None


#: RSS, PSS, USS and anonymous PSS of one process, as one read gives them.
_Figures = tuple[int, int | None, int | None, int | None, int | None]


def _read_detail_psutil(pid: int) -> _Figures | None:
    """RSS, PSS and USS through psutil (reads the full smaps on Linux: slow); ``None`` when gone."""
    try:
        process = psutil.Process(pid)
        try:
            full = process.memory_full_info()
        except psutil.AccessDenied:
            return int(process.memory_info().rss), None, None, None, None
    except psutil.Error:
        return None
    return int(full.rss), getattr(full, "pss", None), getattr(full, "uss", None), None, None


def _read_rss(pid: int) -> int | None:
    figures = _read_statm(pid)
    return None if figures is None else figures[0]


def _read_statm(pid: int) -> tuple[int, int | None] | None:
    """RSS and resident shared bytes from statm (shared ``None`` through psutil); ``None`` when gone."""
    if not _HAVE_PROC:
        rss = _read_rss_psutil(pid)
        return None if rss is None else (rss, None)
    try:
        data = _read_proc(pid, "statm")
    except OSError:
        rss = _read_rss_psutil(pid)
        return None if rss is None else (rss, None)
    figures = None if data is None else parse_statm(data)
    return figures if figures is not None and figures[0] else None


def _read_detail(pid: int) -> _Figures | None:
    if not _HAVE_PROC:
        return _read_detail_psutil(pid)
    try:
        data = _read_proc(pid, "smaps_rollup")
    except PermissionError:
        rss = _read_rss(pid)
        return None if rss is None else (rss, None, None, None, None)
    except OSError:
        return _read_detail_psutil(pid)
    if data is None:
        # Gone, or a kernel older than 4.14 without smaps_rollup.
        return _read_detail_psutil(pid) if os.path.exists(f"/proc/{pid}") else None
    figures = parse_smaps_rollup(data)
    if figures is None or figures.rss_bytes == 0:
        return None  # a zombie: no memory left to count
    shared = None if figures.anon_bytes is None else max(0, figures.rss_bytes - figures.anon_bytes)
    return figures.rss_bytes, figures.pss_bytes, figures.uss_bytes, figures.pss_anon_bytes, shared


def read_tree(pids: Iterable[int], *, detail: bool = True, kinds: Mapping[int, str] | None = None) -> TreeReading:
    """Read the memory of ``pids`` now; processes that have exited are skipped silently.

    ``detail=True`` reads RSS, PSS and USS from ``smaps_rollup`` (psutil's
    ``memory_full_info`` where that file is missing); ``detail=False`` reads RSS only from
    ``statm``, cheap enough for peak polling. ``kinds`` maps pids to kinds (as
    ``discover_browser_tree`` returns them); without it each process is classified now.
    """
    started_wall = time.perf_counter()
    started_cpu = time.thread_time()
    processes: list[BrowserProcess] = []
    for pid in pids:
        if detail:
            figures = _read_detail(pid)
        else:
            statm = _read_statm(pid)
            figures = None if statm is None else (statm[0], None, None, None, statm[1])
        if figures is None:
            continue
        kind = kinds.get(pid) if kinds is not None else None
        if kind is None:
            kind = _kind_of_pid(pid)
        rss, pss, uss, pss_anon, shared = figures
        processes.append(BrowserProcess(pid, kind, rss, pss, uss, pss_anon, shared))
    rss_total = sum(process.rss_bytes for process in processes)
    pss_total = uss_total = pss_anon_total = None
    if detail:
        pss_total = sum(p.pss_bytes if p.pss_bytes is not None else p.rss_bytes for p in processes)
        uss_total = sum(p.uss_bytes if p.uss_bytes is not None else p.rss_bytes for p in processes)
        if any(p.pss_anon_bytes is not None for p in processes):
            pss_anon_total = sum(p.pss_anon_bytes if p.pss_anon_bytes is not None else p.rss_bytes for p in processes)
    return TreeReading(
        processes=tuple(processes),
        rss_bytes=rss_total,
        pss_bytes=pss_total,
        uss_bytes=uss_total,
        cost_seconds=time.perf_counter() - started_wall,
        cpu_seconds=time.thread_time() - started_cpu,
        pss_anon_bytes=pss_anon_total,
    )


def _grown_pss(base: BrowserProcess, now: BrowserProcess, split_shared: bool, thinning: float = 1.0) -> int:
    """A process's PSS now, from its PSS at ``base`` (a detail reading) and its RSS growth since: the anonymous
    growth whole, the shared part at the share of it the process held, times ``thinning`` (processes then / now)."""
    base_pss = base.pss_bytes if base.pss_bytes is not None else base.rss_bytes
    if not split_shared or None in (base.shared_bytes, now.shared_bytes, base.pss_anon_bytes) or not base.shared_bytes:
        return max(0, base_pss + now.rss_bytes - base.rss_bytes)
    assert base.shared_bytes is not None and now.shared_bytes is not None and base.pss_anon_bytes is not None
    shared_pss = max(0, base_pss - base.pss_anon_bytes)
    share = min(1.0, shared_pss / base.shared_bytes)
    grown_anon = (now.rss_bytes - now.shared_bytes) - (base.rss_bytes - base.shared_bytes)
    shared_now = shared_pss + share * (now.shared_bytes - base.shared_bytes)
    return max(0, int(base.pss_anon_bytes + grown_anon + thinning * shared_now))


def _split_ratios(reading: TreeReading) -> dict[str, tuple[float, float]]:
    """Per kind, anonymous PSS over anonymous RSS and shared PSS over shared RSS of a detail reading (a new process
    of the kind counts at those)."""
    sums: dict[str, list[int]] = {}
    for p in reading.processes:
        if p.pss_bytes is None or p.pss_anon_bytes is None or p.shared_bytes is None:
            continue
        row = sums.setdefault(p.kind, [0, 0, 0, 0])
        row[0] += p.pss_anon_bytes
        row[1] += p.rss_bytes - p.shared_bytes
        row[2] += max(0, p.pss_bytes - p.pss_anon_bytes)
        row[3] += p.shared_bytes
    return {kind: (min(1.0, a / b) if b else 1.0, min(1.0, c / d) if d else 1.0) for kind, (a, b, c, d) in sums.items()}


def _pss_ratios(reading: TreeReading) -> dict[str, float]:
    """Per kind, summed PSS over summed RSS of a detail reading (what a new process of that kind is counted at)."""
    rss: dict[str, int] = {}
    pss: dict[str, int] = {}
    for process in reading.processes:
        if process.pss_bytes is not None and process.rss_bytes:
            rss[process.kind] = rss.get(process.kind, 0) + process.rss_bytes
            pss[process.kind] = pss.get(process.kind, 0) + process.pss_bytes
    return {kind: pss[kind] / rss[kind] for kind in rss if rss[kind]}


def _kind_of_pid(pid: int) -> str:
    if _HAVE_PROC:  # two reads of /proc (psutil's Process reads more and costs ~6x the CPU)
        comm, cmdline = _read_proc_quietly(pid, "comm"), _read_proc_quietly(pid, "cmdline")
        if comm is not None and cmdline is not None:
            kind = classify(comm.decode(errors="replace").strip(), parse_cmdline(cmdline))
            return kind if kind is not None else OTHER_KIND
    try:
        kind = _process_kind(psutil.Process(pid))
    except psutil.Error:
        kind = None
    return kind if kind is not None else OTHER_KIND


#: Seconds between rediscoveries while the tree has no browser process yet (Playwright's driver starts it later).
SEARCH_SECONDS = 0.5
#: The CPU a process's PSS reading (``smaps_rollup``) is expected to take before one was measured: 1.4-3.4 ms a process
#: was measured in 60-book crawls (5-12 processes a reading).
PSS_CPU_PER_PROCESS_SECONDS = 0.003


class TreeSampler:
    """Samples a browser tree on a schedule, keeping the peaks; for one sampler thread.

    Each ``sample()`` rediscovers the tree when ``rescan_seconds`` have passed (and when a detail reading is asked
    for: a checkpoint's), and with ``watch_forks`` adds the zygotes' new children at every reading; it reads PSS/USS
    when ``detail_seconds`` have passed and RSS only otherwise; a process that exited is dropped without a
    rediscovery (renderers exit as pages close: rediscovering then made it nearly every reading).
    ``peak_rss_bytes`` is the highest summed RSS seen. ``peak_pss_bytes`` is the highest summed PSS, measured on
    detail reads and estimated on RSS reads as each process's last PSS plus its RSS growth since: private growth
    raises RSS and PSS alike, and new sharers only lower the PSS of the others, so while the tree grows the estimate
    errs high (~1.1x with five new 50 MiB pages); when sharers exit, the share they leave to the others is seen at
    the next detail read. A process first seen on an RSS read has its PSS read once then (one ``smaps_rollup``,
    ~3 ms), so a new renderer is not counted at its RSS, which for Chromium is 3-5 times its PSS (that gave ~1.6x).
    """

    def __init__(
        self,
        root_pid: int | None = None,
        *,
        rescan_seconds: float = 2.0,
        detail_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        discover: Callable[[int | None], dict[int, str]] | None = None,
        watch_forks: bool = False,
    ) -> None:
        if rescan_seconds < 0 or detail_seconds < 0:
            raise ValueError(f"rescan_seconds ({rescan_seconds}) and detail_seconds ({detail_seconds}) must be >= 0")
        self.root_pid = root_pid
        self.rescan_seconds = rescan_seconds
        self.detail_seconds = detail_seconds
        self._clock = clock
        self._known: dict[int, tuple[bytes, str | None]] = {}  # kinds by name, across rediscoveries
        self._discover = discover or (lambda root: discover_browser_tree(root, self._known))
        self._kinds: dict[int, str] = {}
        self.watch_forks = watch_forks and discover is None and _HAVE_CHILDREN
        self._next_rescan = float("-inf")
        self._next_detail = float("-inf")
        self._base: dict[int, BrowserProcess] = {}  # pid -> the process at the last detail read (PSS read)
        self._ratios: dict[str, float] = {}  # kind -> summed PSS / summed RSS of its processes at the last detail read
        self._split_ratios: dict[str, tuple[float, float]] = {}  # kind -> (anonymous, shared) PSS / RSS, the same
        self.last: TreeReading | None = None
        self.last_detail: TreeReading | None = None
        self.peak_rss_bytes = 0
        self.peak_pss_bytes = 0
        self.peak_pss_estimated = False
        self.peak_uss_bytes = 0
        self.peak_pss_anon_bytes = 0
        self.samples = 0
        self.detail_samples = 0
        self.rescans = 0
        self.cost_seconds = 0.0
        self.cpu_seconds = 0.0
        self._pss_cpu_per_process = 0.0  # CPU seconds a process's PSS took at the last detail reading (0: none yet)

    @property
    def kinds(self) -> dict[int, str]:
        """Return ``{pid: kind}`` of the tree as last discovered."""
        return dict(self._kinds)

    def rescan(self) -> dict[int, str]:
        """Rediscover the tree now and return ``{pid: kind}``."""
        started_wall = time.perf_counter()
        started_cpu = time.thread_time()
        self._kinds = self._discover(self.root_pid)
        found = "browser" in self._kinds.values()  # until Chromium has launched, it is looked for again soon
        self._next_rescan = self._clock() + (self.rescan_seconds if found else min(self.rescan_seconds, SEARCH_SECONDS))
        self.rescans += 1
        self.cost_seconds += time.perf_counter() - started_wall
        self.cpu_seconds += time.thread_time() - started_cpu
        return self.kinds

    @property
    def has_browser_base(self) -> bool:
        """Whether a PSS reading has read the browser process (the estimate's base for the processes it knows)."""
        return any(process.kind == "browser" for process in self._base.values())

    def expected_pss_cpu_seconds(self) -> float:
        """What a PSS reading of the tree as last discovered would cost in CPU: at the last detail reading's cost per
        process, or :data:`PSS_CPU_PER_PROCESS_SECONDS` before any."""
        return (self._pss_cpu_per_process or PSS_CPU_PER_PROCESS_SECONDS) * len(self._kinds)

    def sample(self, *, detail: bool | None = None, read_new: bool = True) -> TreeReading:
        """Take one reading (detail as scheduled unless forced), update the peaks and return it; ``read_new=False``
        spares reading the PSS of processes new since the last detail reading (they count at the PSS/RSS ratio of
        their kind at that reading)."""
        now = self._clock()
        if now >= self._next_rescan or detail:  # a reading asked for in detail (a checkpoint's) sees the tree as it is
            self.rescan()
        elif self.watch_forks:  # between rescans, the zygotes' new children (renderers) at every reading
            self._find_forked()
        if detail is None:
            detail = now >= self._next_detail
        if detail:
            self._next_detail = now + self.detail_seconds
        reading = read_tree(list(self._kinds), detail=detail, kinds=self._kinds)
        if len(reading.processes) < len(self._kinds):  # processes exited: dropped (a new one waits for the rescan)
            alive = {process.pid for process in reading.processes}
            self._kinds = {pid: kind for pid, kind in self._kinds.items() if pid in alive}
        if not detail and self._base and read_new:
            self._read_new_processes(reading)
        self.record(reading)
        return reading

    def _find_forked(self) -> None:
        """Add the renderers the zygotes forked since the last rescan (a few children files): unseen, four renderers
        of a rotated context's pages left estimates 80-200 MiB under the tree's PSS until the next rescan."""
        began = time.thread_time()
        for pid in [pid for pid, kind in self._kinds.items() if kind == "zygote"]:
            for child in _children_of(pid):
                if child not in self._kinds:
                    self._kinds[child] = _kind_of(child, self._known) or OTHER_KIND
        self.cpu_seconds += time.thread_time() - began

    def _read_new_processes(self, reading: TreeReading) -> None:
        """Read PSS once for processes that appeared since the last detail reading."""
        new = [process.pid for process in reading.processes if process.pid not in self._base]
        if not new:
            return
        first = read_tree(new, detail=True, kinds=self._kinds)
        self.cost_seconds += first.cost_seconds
        self.cpu_seconds += first.cpu_seconds
        for process in first.processes:
            self._base[process.pid] = process

    def record(self, reading: TreeReading) -> None:
        """Update the peaks and counters from a reading (``sample`` calls it)."""
        self.last = reading
        self.samples += 1
        self.cost_seconds += reading.cost_seconds
        self.cpu_seconds += reading.cpu_seconds
        self.peak_rss_bytes = max(self.peak_rss_bytes, reading.rss_bytes)
        if reading.pss_bytes is not None:
            self.last_detail = reading
            self.detail_samples += 1
            if reading.processes:
                self._pss_cpu_per_process = reading.cpu_seconds / len(reading.processes)
            self._base = {p.pid: p for p in reading.processes}
            self._ratios = _pss_ratios(reading)
            self._split_ratios = _split_ratios(reading)
            self._raise_pss_peak(reading.pss_bytes, estimated=False)
            self.peak_uss_bytes = max(self.peak_uss_bytes, reading.uss_bytes or 0)
            self.peak_pss_anon_bytes = max(self.peak_pss_anon_bytes, reading.pss_anon_bytes or 0)
        elif self._base:
            self._raise_pss_peak(self.estimate_pss_bytes(reading), estimated=True)

    def _raise_pss_peak(self, pss_bytes: int, *, estimated: bool) -> None:
        if pss_bytes > self.peak_pss_bytes:
            self.peak_pss_bytes = pss_bytes
            self.peak_pss_estimated = estimated

    def estimate_pss_bytes(self, reading: TreeReading, *, split_shared: bool = True) -> int:
        """Estimate the summed PSS of an RSS-only reading: per process its last PSS plus its RSS growth since, the
        anonymous part whole and the shared part (file-backed and shmem) at the share of it the process held then;
        a process never read counts at its kind's PSS/RSS ratio. ``split_shared=False`` counts all RSS growth whole
        (the estimate before: shared growth, counted once per process that maps it, made it err high)."""
        total = 0
        # Pages the whole tree maps (the binary, its libraries) are shared by every process: the PSS they add up to
        # stays that of their one copy as processes come and go, so each process's shared part goes as 1 / processes
        # (the browser's processes: Playwright's driver maps none of Chromium's files).
        browsers_then = sum(1 for p in self._base.values() if p.kind != "driver")
        browsers_now = sum(1 for p in reading.processes if p.kind != "driver")
        # Only down: when processes exit, the shares they leave go to those that map the same pages, which a ratio of
        # counts over-states (a 17-process tree down to 8 doubled every share, a 1.4 GB estimate of a 0.75 GB tree).
        browser_thinning = min(1.0, browsers_then / browsers_now) if split_shared and browsers_now else 1.0
        for process in reading.processes:
            thinning = 1.0 if process.kind == "driver" else browser_thinning
            base = self._base.get(process.pid)
            split = self._split_ratios.get(process.kind)
            if base is None and split_shared and split is not None and process.shared_bytes is not None:
                anon_ratio, shared_ratio = split
                total += int(anon_ratio * (process.rss_bytes - process.shared_bytes)
                             + shared_ratio * thinning * process.shared_bytes)
            elif base is None:
                total += int(process.rss_bytes * self._ratios.get(process.kind, 1.0))
            else:
                total += _grown_pss(base, process, split_shared, thinning)
        return total

    def reset_peaks(self) -> None:
        """Forget the peaks (start a new window); the next sample reads PSS."""
        self.peak_rss_bytes = self.peak_pss_bytes = self.peak_uss_bytes = self.peak_pss_anon_bytes = 0
        self.peak_pss_estimated = False
        self._next_detail = float("-inf")

    def to_json(self) -> dict[str, Any]:
        """Return the peaks, the counts and the last detail reading as a JSON-ready dict."""
        return {
            "peak_rss_bytes": self.peak_rss_bytes,
            "peak_pss_bytes": self.peak_pss_bytes,
            "peak_pss_estimated": self.peak_pss_estimated,
            "peak_uss_bytes": self.peak_uss_bytes,
            "peak_pss_anon_bytes": self.peak_pss_anon_bytes,
            "samples": self.samples,
            "detail_samples": self.detail_samples,
            "rescans": self.rescans,
            "cost_seconds": self.cost_seconds,
            "cpu_seconds": self.cpu_seconds,
            "last_detail": self.last_detail.to_json() if self.last_detail is not None else None,
        }
