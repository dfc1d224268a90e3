"""Command line of ``python -m fixture_sites.replay`` (replay process)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from fixture_sites.cli import loopback_host, port_number
from fixture_sites.replay.server import check, run
from fixture_sites.replay.site import Knobs


def _non_negative(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value!r}") from None
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value!r}")
    return number


def _factor(value: str) -> float:
    number = _non_negative(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"inflate factor must be >= 1, got {value!r}")
    return number


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser."""
    parser = argparse.ArgumentParser(prog="python -m fixture_sites.replay",
                                     description="Serve a recorded crawl (Scrapy HTTP cache, HAR, WARC) on loopback.")
    parser.add_argument("--recording", type=Path, required=True, help="Scrapy HTTP cache dir or .db, .har, .warc[.gz]")
    parser.add_argument("--check", action="store_true", help="print the recording's summary as JSON and exit")
    parser.add_argument("--host", type=loopback_host, default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=0, help="TCP port, 0 for a free one (default 0)")
    parser.add_argument("--latency", type=_non_negative, default=0.0, help="seconds added before every reply")
    parser.add_argument("--drip", type=_non_negative, default=0.0, help="body bytes per second (0: full speed)")
    parser.add_argument("--inflate", type=_factor, default=1.0, help="serve bodies this many times their size (>= 1)")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, then check the recording or serve it until SIGTERM/SIGINT; return the exit status."""
    args = build_parser().parse_args(argv)
    if args.check:
        return check(args.recording)
    knobs = Knobs(args.latency, int(args.drip), args.inflate)
    return run(args.recording, knobs, args.host, args.port, args.parent_pid)
