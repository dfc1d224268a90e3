"""Judge the checkpoints saved by ``detection.py --json`` again, with the verdict engine as it is now.

    python benchmarks/rejudge.py /tmp/detection-*.json   # files a detection run wrote with --json

Each saved run keeps its checkpoints' heap estimate, scheduler length, drain flag, tracer bytes and window residue,
which is what the trend reads, so a rule change can be tried on real crawls (hundreds a second) before crawling again:
per cell, how many runs kept their verdict and which changed (recorded -> now). Replaying a file on the engine that
wrote it gives back every recorded trend verdict; rules that read live objects or what was held after the crawl
(proven retention) see none here.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pytest_crawlmem.core.growth import analyze
from pytest_crawlmem.core.models import Checkpoint


def checkpoints_of(rows: list[list[Any]]) -> list[Checkpoint]:
    """Checkpoints from a saved run's ``[responses, heap estimate, scheduled, drained, tracer bytes, residue]`` rows."""
    return [Checkpoint(responses=n, t_seconds=n / 100, rss_bytes=heap or 0, heap_bytes=(heap or 0) + tracer + residue,
                       traced_bytes=None, scheduled=queued, allocated_blocks=0, tracer_bytes=tracer, plugin_bytes=residue,
                       drained=drained)
            for n, heap, queued, drained, tracer, residue in rows]


def cells_of(document: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The saved runs of one ``--json`` file, per cell (leaky keys, ``clean:`` scenarios, ``stability``)."""
    if "stability_runs" in document:  # written mid-run by --stability
        return {"stability": document["stability_runs"]}
    detection = document["detection"]
    cells = {key: rows for key, rows in detection["runs"]["leaky"].items()}
    cells.update({f"clean:{name}": rows for name, rows in detection["runs"]["clean"].items()})
    if detection.get("stability"):
        cells["stability"] = detection["stability"]["runs"]
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("files", type=Path, nargs="+", help="detection.py --json files")
    args = parser.parse_args()
    changes: dict[str, Counter[tuple[str, str]]] = {}
    for path in args.files:
        document = json.loads(path.read_text())
        if "detection" not in document and "stability_runs" not in document:
            print(f"{path}: not a detection.py --json file, skipped")
            continue
        for cell, rows in cells_of(document).items():
            for run in rows:
                if run.get("checkpoints"):
                    now = analyze(checkpoints_of(run["checkpoints"])).verdict
                    changes.setdefault(cell, Counter())[(run["verdict"], now)] += 1
    for cell, counts in changes.items():
        kept = sum(n for (was, now), n in counts.items() if was == now)
        moved = ", ".join(f"{was} -> {now} {n}" for (was, now), n in sorted(counts.items()) if was != now)
        print(f"{cell:24} {kept}/{sum(counts.values())} kept their verdict" + (f"; {moved}" if moved else ""))


if __name__ == "__main__":
    main()
