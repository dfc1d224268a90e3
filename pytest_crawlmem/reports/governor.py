"""The memory governor's decisions (``governor.json`` beside the report) as markers and bands of report.html's timeline.

Runs wherever a report is written (pytest process, ``crawlmem report``); a missing or unreadable file is no marker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_crawlmem.governor.context_policy import BROWSER_CONTEXT
from pytest_crawlmem.governor.policy import GOVERNOR_FILE, RESTORE
from pytest_crawlmem.reports.svgchart import Band, Marker

#: The band of the periods the governor held the crawl under its settings (lowered until its last restore).
GOVERNED_BAND = "governed"
#: The band of a rotated browser context, from its rotation to its close.
ROTATION_BAND = "rotation"


def load_decisions(report_dir: Path | None) -> list[dict[str, Any]]:
    """The decisions the governor recorded for the crawl reported in ``report_dir`` (none without the file)."""
    if report_dir is None:
        return []
    try:
        record = json.loads((Path(report_dir) / GOVERNOR_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    decisions = record.get("decisions") if isinstance(record, dict) else None
    return [d for d in decisions if isinstance(d, dict)] if isinstance(decisions, list) else []


def governor_markers(report_dir: Path | None, x_key: str) -> list[Marker]:
    """One vertical marker per decision, at its response count or time; its title is the decision's sentence."""
    field = "responses" if x_key == "responses" else "t_seconds"
    markers = []
    for decision in load_decisions(report_dir):
        x, kind = decision.get(field), decision.get("kind", "")
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            markers.append(Marker(float(x), f"governor {kind}", f"governor ({kind}): {decision.get('message', '')}"))
    return markers


def governor_bands(report_dir: Path | None, x_key: str, x_end: float) -> list[Band]:
    """The spans the governor acted over, from its decisions (none without governor.json).

    A ``governed`` band opens at a decision that lowers (in flight, backlog, retained, close) and ends at the last
    restore of the restores that follow it, or at ``x_end`` (the crawl's last sample) when none follows. A
    ``rotation`` band runs from a browser context's rotation to its close (``x_end`` if it never closed).
    """
    field = "responses" if x_key == "responses" else "t_seconds"
    decisions = [d for d in load_decisions(report_dir) if isinstance(d.get(field), (int, float))
                 and not isinstance(d.get(field), bool)]
    bands: list[Band] = []
    opened: float | None = None
    reasons: list[str] = []
    restored: float | None = None
    rotations: list[tuple[float, str]] = []
    for decision in decisions:
        x, kind, message = float(decision[field]), str(decision.get("kind", "")), str(decision.get("message", ""))
        if kind == BROWSER_CONTEXT:
            if "rotating browser context" in message:
                rotations.append((x, message))
            elif "closed browser context" in message and rotations:
                start, why = rotations.pop(0)
                bands.append(Band(start, x, ROTATION_BAND, f"governor: {why}; {message}"))
            continue
        if kind == RESTORE:
            if opened is not None:
                restored = x
            continue
        if opened is not None and restored is not None:  # lowered again after restoring: the band ended there
            bands.append(_governed(opened, restored, reasons))
            opened, restored, reasons = None, None, []
        if opened is None:
            opened = x
        reasons.append(kind)
    if opened is not None:
        bands.append(_governed(opened, restored if restored is not None else max(x_end, opened), reasons))
    bands += [Band(start, max(x_end, start), ROTATION_BAND, f"governor: {why} (not closed by the end)")
              for start, why in rotations]
    return sorted(bands, key=lambda band: (band.x0, band.kind))


def _governed(x0: float, x1: float, kinds: list[str]) -> Band:
    levers = ", ".join(dict.fromkeys(kinds))
    return Band(x0, x1, GOVERNED_BAND, f"governor held the crawl under its settings ({levers}) until it restored them")
