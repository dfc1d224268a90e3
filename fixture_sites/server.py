"""Runs the site: binds, prints the ready line, serves until SIGTERM/SIGINT (site process)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import signal
import sys
from collections.abc import Awaitable, Callable

from fixture_sites.limits import IDLE_TIMEOUT_SECONDS, LISTEN_BACKLOG
from fixture_sites.protocol import ConnectionRegistry, Handler, HttpConnection
from fixture_sites.routes import Site

READY_PREFIX = "fixture-site listening on "
#: The stderr line a stop signal leaves, then the signal's name: the parent tells an interrupted run from a crash by it.
STOPPED_PREFIX = "fixture-site stopped by "
_WATCH_INTERVAL_SECONDS = 0.5


def url_for(host: str, port: int) -> str:
    """Return the base URL of a listening address (IPv6 hosts in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def raise_open_file_limit() -> None:
    """Lift the soft open-files limit to the hard limit so many clients can connect."""
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else 65_536
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _parent_gone(parent_pid: int, first_ppid: int) -> bool:
    """True when the process that asked to be watched has exited."""
    if first_ppid == parent_pid and os.getppid() != parent_pid:
        return True
    try:
        os.kill(parent_pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


async def _housekeeping(registry: ConnectionRegistry, stop: asyncio.Event, parent_pid: int | None) -> None:
    """Close idle connections and stop when the watched parent process dies."""
    first_ppid = os.getppid()
    ticks = 0
    while not stop.is_set():
        await asyncio.sleep(_WATCH_INTERVAL_SECONDS)
        ticks += 1
        if ticks % 20 == 0:
            registry.close_idle(IDLE_TIMEOUT_SECONDS)
        if parent_pid is not None and _parent_gone(parent_pid, first_ppid):
            stop.set()


async def serve(host: str, port: int, seed: int, parent_pid: int | None = None) -> None:
    """Serve the site on ``host:port`` until a stop signal (or the watched parent's death)."""
    site = Site(seed)

    def bound(base_url: str) -> None:
        site.shots.base_url = base_url  # /shot captures pages of this site

    async def closing() -> None:
        with contextlib.suppress(Exception):  # the capture browser, if /shot launched one
            await asyncio.wait_for(site.shots.aclose(), 10)

    await serve_handler(site, host, port, parent_pid, on_bound=bound, on_close=closing)


async def serve_handler(
    handler: Handler,
    host: str,
    port: int,
    parent_pid: int | None,
    *,
    on_bound: Callable[[str], None] | None = None,
    on_close: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Bind ``host:port``, print the ready line, answer with ``handler`` until a stop signal; shared by every site."""
    loop = asyncio.get_running_loop()
    registry = ConnectionRegistry()
    server = await loop.create_server(
        lambda: HttpConnection(handler, registry), host, port, backlog=LISTEN_BACKLOG, reuse_address=True
    )
    base_url = url_for(host, server.sockets[0].getsockname()[1])
    if on_bound is not None:
        on_bound(base_url)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _stopped_by, signum, stop)
    sys.stdout.write(f"{READY_PREFIX}{base_url}\n")
    sys.stdout.flush()
    housekeeping = loop.create_task(_housekeeping(registry, stop, parent_pid))
    try:
        await stop.wait()
    finally:
        housekeeping.cancel()
        server.close()
        registry.close_all()
        await server.wait_closed()
        if on_close is not None:
            await on_close()
        await _cancel_remaining_tasks()


def _stopped_by(signum: int, stop: asyncio.Event) -> None:
    """A stop signal: say which on stderr (once), then stop serving."""
    if not stop.is_set():
        sys.stderr.write(f"{STOPPED_PREFIX}{signal.Signals(signum).name}\n")
        sys.stderr.flush()
    stop.set()


async def _cancel_remaining_tasks() -> None:
    """Cancel the tasks of responses still in flight and wait for them."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def run(host: str, port: int, seed: int, parent_pid: int | None = None) -> int:
    """Run the site in this process; return the exit status."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="fixture-site %(levelname)s %(message)s")
    raise_open_file_limit()
    try:
        asyncio.run(serve(host, port, seed, parent_pid))
    except OSError as error:
        print(f"fixture-site: cannot listen on {host}:{port}: {error}", file=sys.stderr)
        return 1
    return 0
