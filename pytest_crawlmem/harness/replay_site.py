"""Starts the replay site for a recorded crawl and asks it for its summary (pytest process, parent side).

The replay site runs as ``python -u -m fixture_sites.replay --recording PATH`` (its own process, so the recording's
bytes never mix with the measured crawl); this module talks to it over loopback HTTP only.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.replay import _ERROR_PREFIX, REPLAY_MODULE, ReplayError, ReplayKnobs, ReplayTarget, check_copies
from pytest_crawlmem.harness.site import RunningSite, SiteStartError, start_site

NO_KNOBS = ReplayKnobs()  # the recording as it was: no latency, drip or inflation


def replay_command(recording: Path, knobs: ReplayKnobs, python: str = sys.executable) -> list[str]:
    """The command that serves ``recording`` on a free loopback port, tied to this process's life."""
    return [python, "-u", "-m", REPLAY_MODULE, "--recording", str(recording), "--port", "0",
            "--parent-pid", str(os.getpid()), *knobs.argv()]


def _bad_recording(error: SiteStartError, recording: Path) -> ReplayError:
    """Turn the replay site's start failure into the reason it printed."""
    for line in str(error).splitlines():
        if line.startswith(_ERROR_PREFIX):
            return ReplayError(line[len(_ERROR_PREFIX):])
    return ReplayError(f"the replay site for {recording} did not start: {error}")


def fetch_summary(base_url: str, timeout_seconds: float = 10.0) -> dict[str, Any]:
    """Ask a running replay site for its summary: entries, hosts, first URL, hits and misses so far."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    with opener.open(f"{base_url}/__crawlmem__/summary", timeout=timeout_seconds) as reply:
        data: dict[str, Any] = json.loads(reply.read())
    return data


@contextlib.contextmanager
def running_replay(recording: str | os.PathLike[str], *, copies: int = 1, knobs: ReplayKnobs = NO_KNOBS,
                   timeout_seconds: float = 60.0) -> Iterator[ReplayTarget]:
    """Serve ``recording`` for the length of the block; a bad recording raises :class:`ReplayError` naming its first bad entry."""
    path = Path(recording).expanduser().resolve()
    if not path.exists() and not path.with_name(path.name + ".dir").exists():  # dbm.dumb: <spider>.db.dir/.dat
        raise ReplayError(f"replay recording {recording}: no such file or directory")
    try:
        site: RunningSite = start_site(timeout_seconds=timeout_seconds, _argv=replay_command(path, knobs))
    except SiteStartError as exc:
        raise _bad_recording(exc, path) from None
    with site:
        summary = fetch_summary(site.base_url)
        yield ReplayTarget(site.base_url, check_copies(copies), str(path), summary)
