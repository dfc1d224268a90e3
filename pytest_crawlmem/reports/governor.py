"""The memory governor's decisions (``governor.json`` beside the report) as markers of report.html's timeline.

Runs wherever a report is written (pytest process, ``crawlmem report``); a missing or unreadable file is no marker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.governor_policy import GOVERNOR_FILE
from .svgchart import Marker


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
