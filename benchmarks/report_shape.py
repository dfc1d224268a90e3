"""Compare the shape of two report trees: report.json's keys (recursively) and report.html's structure, per test.

Run the same tests twice, once per version of the code, each with its own ``--crawlmem-report-dir``; then::

    python benchmarks/report_shape.py BEFORE_DIR AFTER_DIR [--out RESULT.json]

Figures differ between two crawls; the shape must not: the same key paths in every report.json and the same
headings, table headers and element classes in every report.html. Exits 1 when a shape differs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import latest


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON value (list items as ``[]``; the keys of ``stats`` and count maps not followed)."""
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            paths.add(path)
            if key not in ("stats", "status_counts", "live_refs", "by_verdict", "billed_by_verdict", "pss_by_kind_at_peak"):
                paths |= key_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            paths |= key_paths(item, f"{prefix}[]")
    return paths


class _Structure(HTMLParser):
    """The headings' and table headers' text (digits masked) and every element's tag and class, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[str] = []
        self._text_of: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = dict(attrs).get("class") or ""
        self.items.append(f"<{tag} {classes}>".replace(" >", ">"))
        self._text_of = tag if tag in ("h1", "h2", "h3", "th", "summary") else None

    def handle_data(self, data: str) -> None:
        if self._text_of and data.strip():
            self.items.append(f"{self._text_of}: {re.sub(r'[0-9][0-9.,]*', '#', data.strip())}")


def html_structure(path: Path) -> list[str]:
    """:class:`_Structure` of one report.html (the samples' chart excluded: its points vary with the crawl)."""
    text = re.sub(r"<svg.*?</svg>", "<svg/>", path.read_text(encoding="utf-8"), flags=re.S)
    parser = _Structure()
    parser.feed(text)
    return parser.items


def compare(before: Path, after: Path) -> dict[str, Any]:
    """Per test directory of ``before``: the report.json key paths and report.html items only one side has."""
    out: dict[str, Any] = {}
    for old in sorted(p.parent for p in before.glob("*/report.json")):
        new = after / old.name
        keys_old = key_paths(json.loads((old / "report.json").read_text()))
        keys_new = key_paths(json.loads((new / "report.json").read_text()))
        html_old, html_new = html_structure(old / "report.html"), html_structure(new / "report.html")
        out[old.name] = {
            "json_keys": len(keys_old), "json_only_before": sorted(keys_old - keys_new),
            "json_only_after": sorted(keys_new - keys_old), "html_items": len(html_old),
            "html_same": html_old == html_new,
            "html_only_before": sorted(set(html_old) - set(html_new)), "html_only_after": sorted(set(html_new) - set(html_old)),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = compare(args.before, args.after)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    latest.save("report_shape", "latest", result)
    same = all(not r["json_only_before"] and not r["json_only_after"] and r["html_same"] for r in result.values())
    return 0 if result and same else 1


if __name__ == "__main__":
    sys.exit(main())
