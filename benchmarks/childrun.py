"""Run one benchmark crawl in a fresh process and read the ``RESULT {json}`` line it prints (no reactor here)."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def run_child(command: list[str], label: str = "", timeout: float = 900) -> dict[str, Any] | None:
    """The last ``RESULT`` record the child printed; ``None`` (with its stderr's tail printed) when it printed none."""
    out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        print(f"{label}{': ' if label else ''}failed\n{out.stderr[-2000:]}", flush=True)
        return None
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    return result
