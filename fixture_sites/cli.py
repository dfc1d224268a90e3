"""Command line of ``python -m fixture_sites`` (site process)."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Sequence

from fixture_sites.server import run


def loopback_host(value: str) -> str:
    """Accept only loopback addresses (``localhost`` means 127.0.0.1)."""
    if value == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"refusing host {value!r}: the fixture site binds loopback only (127.0.0.1 or ::1)"
        ) from None
    if not address.is_loopback:
        raise argparse.ArgumentTypeError(
            f"refusing non-loopback host {value!r}: the fixture site binds loopback only (127.0.0.1 or ::1)"
        )
    return str(address)


def port_number(value: str) -> int:
    """Accept a TCP port 0..65535 (0 picks a free one)."""
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port must be an integer in 0..65535, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port must be an integer in 0..65535, got {port}")
    return port


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m fixture_sites",
        description="Serve the deterministic crawl-target site of pytest-crawlmem on loopback.",
    )
    parser.add_argument("--host", type=loopback_host, default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=0, help="TCP port, 0 for a free one (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="content seed: same seed and URL, same bytes (default 0)")
    parser.add_argument(
        "--parent-pid",
        type=int,
        default=None,
        help="exit when this process is gone (the launcher passes its own pid)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and serve until SIGTERM/SIGINT; return the exit status."""
    args = build_parser().parse_args(argv)
    return run(args.host, args.port, args.seed, args.parent_pid)
