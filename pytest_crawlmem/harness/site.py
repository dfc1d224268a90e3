"""Starts the fixture site as a child process and stops it (test process, parent side).

The site runs as ``python -u -m fixture_sites`` so that its allocations never mix
with the measured crawl. This module never imports ``fixture_sites``: it only finds
where the package lives, to put it on the child's ``PYTHONPATH``.
"""

from __future__ import annotations

import atexit
import collections
import importlib.util
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO

__all__ = ["RunningSite", "SiteStartError", "start_site"]

SITE_MODULE = "fixture_sites"
_READY_LINE = re.compile(r"fixture-site listening on (http://(?:127\.\d+\.\d+\.\d+|\[::1\]):\d+)")
_STDERR_TAIL_LINES = 50
_STOP_SENTINEL = ""
#: What the site writes to stderr when a signal stops it (fixture_sites/server.py), then the signal's name.
_STOPPED_BY = re.compile(r"fixture-site stopped by (SIG[A-Z0-9]+)")


def _new_tail() -> collections.deque[str]:
    """Return an empty buffer for the last lines of the site's stderr."""
    return collections.deque(maxlen=_STDERR_TAIL_LINES)


class SiteStartError(RuntimeError):
    """The fixture site did not come up: it exited, hung or printed something unexpected."""


@dataclass(eq=False)
class RunningSite:
    """A fixture-site child process and its base URL (``http://127.0.0.1:PORT``, no trailing slash)."""

    base_url: str
    process: subprocess.Popen[str]
    _stderr_tail: collections.deque[str] = field(default_factory=_new_tail, repr=False)
    _readers: list[threading.Thread] = field(default_factory=list, repr=False)
    _closed: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        """The site process id."""
        return self.process.pid

    def url(self, path: str) -> str:
        """Return ``base_url + path``; ``path`` must start with ``/``."""
        if not path.startswith("/"):
            raise ValueError(f"fixture site path must start with '/', got {path!r}")
        return self.base_url + path

    def stderr_tail(self) -> str:
        """Return the last lines the site wrote to stderr (for error messages)."""
        return "".join(self._stderr_tail)

    def stopped_by(self) -> str | None:
        """The signal that stopped the site (``"SIGTERM"``), once it has exited; None while it runs or when no signal did."""
        if self.process.poll() is None:
            return None
        for reader in self._readers:
            reader.join(timeout=1.0)  # its last stderr line
        found = [m[1] for m in map(_STOPPED_BY.fullmatch, (line.strip() for line in self._stderr_tail)) if m]
        return found[-1] if found else None

    def close(self, timeout_seconds: float = 5.0) -> None:
        """Stop the site: SIGTERM, wait up to ``timeout_seconds``, then SIGKILL (idempotent)."""
        if self._closed:
            return
        self._closed = True
        _stop_process(self.process, timeout_seconds)
        for reader in self._readers:
            reader.join(timeout=1.0)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        _RUNNING.discard(self)

    def __enter__(self) -> RunningSite:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


_RUNNING: weakref.WeakSet[RunningSite] = weakref.WeakSet()


@atexit.register
def _close_all_sites() -> None:
    """Stop sites the caller forgot to close when the interpreter exits."""
    for site in list(_RUNNING):
        site.close(timeout_seconds=2.0)


def _stop_process(process: subprocess.Popen[str], timeout_seconds: float) -> None:
    """Terminate ``process``, escalating to SIGKILL after ``timeout_seconds``."""
    if process.poll() is None:
        try:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
        except ProcessLookupError:
            pass
    try:
        process.wait(timeout=timeout_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def site_package_root() -> Path:
    """Return the directory holding the ``fixture_sites`` package, without importing it."""
    try:
        spec = importlib.util.find_spec(SITE_MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise SiteStartError(f"{SITE_MODULE} is not installed: cannot start the fixture site")
    locations = list(spec.submodule_search_locations or [])
    if locations:
        return Path(locations[0]).resolve().parent
    if spec.origin:
        return Path(spec.origin).resolve().parent
    raise SiteStartError(f"{SITE_MODULE} is installed but has no location on disk")


def _child_env(env: Mapping[str, str] | None, package_root: Path) -> dict[str, str]:
    """Return the child's environment with the package root first on ``PYTHONPATH``."""
    child = dict(os.environ if env is None else env)
    existing = child.get("PYTHONPATH", "")
    child["PYTHONPATH"] = str(package_root) + (os.pathsep + existing if existing else "")
    return child


def _pump_stdout(stream: IO[str], lines: queue.Queue[str]) -> None:
    """Hand the first stdout line over, then keep draining so the pipe never fills."""
    first = True
    for line in stream:
        if first:
            lines.put(line)
            first = False
    if first:
        lines.put(_STOP_SENTINEL)


def _pump_stderr(stream: IO[str], tail: collections.deque[str]) -> None:
    """Keep the last lines of stderr, draining the pipe for the life of the child."""
    for line in stream:
        tail.append(line)


def site_command(python: str, seed: int) -> list[str]:
    """Return the command that runs the site on a free port and ties its life to this process."""
    return [python, "-u", "-m", SITE_MODULE, "--port", "0", "--seed", str(seed), "--parent-pid", str(os.getpid())]


def start_site(
    *,
    seed: int = 0,
    timeout_seconds: float = 10.0,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
    _argv: Sequence[str] | None = None,
) -> RunningSite:
    """Start ``python -m fixture_sites`` on a free loopback port and wait for its ready line."""
    package_root = site_package_root()
    argv = list(_argv) if _argv is not None else site_command(python, seed)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_child_env(env, package_root),
            text=True,
            encoding="utf-8",
            errors="replace",
        )
    except OSError as error:
        raise SiteStartError(f"cannot run the fixture site with {argv[0]!r}: {error}") from None
    assert process.stdout is not None and process.stderr is not None
    site = RunningSite(base_url="", process=process)
    first_lines: queue.Queue[str] = queue.Queue()
    site._readers = [
        threading.Thread(target=_pump_stdout, args=(process.stdout, first_lines), name="site-stdout", daemon=True),
        threading.Thread(target=_pump_stderr, args=(process.stderr, site._stderr_tail), name="site-stderr", daemon=True),
    ]
    for reader in site._readers:
        reader.start()
    _RUNNING.add(site)
    try:
        site.base_url = _await_ready_line(site, first_lines, timeout_seconds)
    except SiteStartError:
        site.close(timeout_seconds=2.0)
        raise
    return site


def _await_ready_line(site: RunningSite, lines: queue.Queue[str], timeout_seconds: float) -> str:
    """Return the base URL from the child's first stdout line, or raise :class:`SiteStartError`."""
    process = site.process
    deadline = time.monotonic() + timeout_seconds
    exited_at: float | None = None
    while True:
        try:
            line = lines.get(timeout=0.05)
            break
        except queue.Empty:
            now = time.monotonic()
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 1.0:
                line = _STOP_SENTINEL  # exited, but something else still holds its stdout open
                break
            if now >= deadline:
                site.close(timeout_seconds=1.0)
                raise SiteStartError(
                    f"fixture site did not report its URL within {timeout_seconds:g} s (pid {process.pid}); "
                    f"it was killed{_stderr_suffix(site)}"
                ) from None
    if line == _STOP_SENTINEL:
        try:
            code: int | None = process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            code = None
        for reader in site._readers:
            reader.join(timeout=1.0)
        raise SiteStartError(f"fixture site exited with code {code} before reporting its URL{_stderr_suffix(site)}")
    match = _READY_LINE.fullmatch(line.strip())
    if match is None:
        raise SiteStartError(f"fixture site printed {line.strip()[:200]!r} instead of its URL{_stderr_suffix(site)}")
    return match[1]


def _stderr_suffix(site: RunningSite) -> str:
    """Format the child's stderr tail for an error message."""
    tail = site.stderr_tail().strip()
    return f"; its stderr ends with:\n{tail}" if tail else "; its stderr was empty"
