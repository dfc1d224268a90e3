"""Runs the replay site: loads the recording, binds loopback, prints the ready line, serves (replay process)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path

from fixture_sites.replay.load import Recording, load_recording
from fixture_sites.replay.recording import RecordingError
from fixture_sites.replay.site import Knobs, ReplaySite
from fixture_sites.server import raise_open_file_limit, serve_handler

#: First line of stderr when the recording cannot be replayed; the rest of the line is the reason.
ERROR_PREFIX = "crawlmem-replay: bad recording: "
EXIT_BAD_RECORDING = 2


async def serve(recording: Recording, knobs: Knobs, host: str, port: int, parent_pid: int | None) -> None:
    """Serve ``recording`` on ``host:port`` until a stop signal (or the watched parent's death)."""
    await serve_handler(ReplaySite(recording, knobs), host, port, parent_pid)


def load_or_explain(path: Path) -> Recording | None:
    """Load the recording; on a bad one print the reason to stderr and return ``None``."""
    try:
        return load_recording(path)
    except RecordingError as exc:
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr)
        return None


def check(path: Path) -> int:
    """Print the recording's summary as JSON (or why it is bad); return the exit status."""
    recording = load_or_explain(path)
    if recording is None:
        return EXIT_BAD_RECORDING
    print(json.dumps(recording.summary()))
    return 0


def run(path: Path, knobs: Knobs, host: str, port: int, parent_pid: int | None = None) -> int:
    """Serve the recording at ``path`` in this process; return the exit status."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="replay-site %(levelname)s %(message)s")
    recording = load_or_explain(path)
    if recording is None:
        return EXIT_BAD_RECORDING
    raise_open_file_limit()
    try:
        asyncio.run(serve(recording, knobs, host, port, parent_pid))
    except OSError as error:
        print(f"replay-site: cannot listen on {host}:{port}: {error}", file=sys.stderr)
        return 1
    return 0
