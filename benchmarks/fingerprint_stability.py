"""Are leak fingerprints stable across reruns, and different across leaks? (issue 56)

    python benchmarks/fingerprint_stability.py [--runs 5] [--append] [--json /tmp/fingerprint_stability.json]

Runs the keeping-line suite (``tests/keeping_suite_source.py``: one spider per holder shape, 630 responses each, real
crawls of the fixture site) ``--runs`` times, each a fresh ``pytest`` process in one directory; every other run inserts
blank lines and a comment at the top of the suite, so every keeping line moves. Per shape it reports how many runs were
``retained-objects``, how many distinct fingerprints those runs gave, and whether any two shapes shared one.
``--append`` adds the new runs to those already in ``--json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import latest  # noqa: E402
from keeping_suite_source import SUITE  # noqa: E402

MOVED = "# moved down by an edit above\n\n\n\n\n" + SUITE


def run_once(directory: Path, index: int) -> dict[str, dict[str, Any]]:
    """One pytest session of the suite; ``{case: {verdict, fingerprint, line}}`` from its report.json files."""
    (directory / "test_suite.py").write_text(MOVED if index % 2 else SUITE)
    reports = directory / f"reports-{index}"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
                    f"--crawlmem-report-dir={reports}", "test_suite.py"], cwd=directory, capture_output=True, check=False,
                   timeout=3600)
    found = {}
    for report in sorted(reports.glob("test_suite.py__test_leak_*_/report.json")):
        result = json.loads(report.read_text())["result"]
        case = report.parent.name.removeprefix("test_suite.py__test_leak_").removesuffix("_")
        holders = result.get("holders") or []
        found[case] = {"verdict": result["growth"]["verdict"], "fingerprint": result["growth"].get("fingerprint", ""),
                       "line": holders[0].get("line") if holders else None,
                       "basis": result["growth"].get("fingerprint_basis", [])}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write every run here")
    parser.add_argument("--append", action="store_true", help="add these runs to those in --json")
    args = parser.parse_args()
    runs = json.loads(args.json.read_text())["raw"] if args.append and args.json.exists() else []
    first = len(runs)
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(first, first + args.runs):
            started = time.monotonic()
            runs.append(run_once(Path(tmp), index))
            print(f"run {index + 1}/{first + args.runs}: {len(runs[-1])} cases in {time.monotonic() - started:.0f} s",
                  flush=True)
    cases = sorted({case for run in runs for case in run})
    table = {}
    for case in cases:
        seen = [run[case] for run in runs if case in run]
        flagged = [s for s in seen if s["verdict"] == "retained-objects"]
        prints = Counter(s["fingerprint"] for s in flagged)
        table[case] = {"runs": len(seen), "flagged": len(flagged), "distinct_fingerprints": len(prints),
                       "most_common_share": f"{prints.most_common(1)[0][1]}/{len(flagged)}" if prints else "0/0",
                       "fingerprints": dict(prints), "lines": sorted({str(s["line"]) for s in flagged}),
                       "bases": sorted({" | ".join(s["basis"]) for s in flagged})}
    owners: dict[str, set[str]] = {}
    for case, row in table.items():
        for fingerprint in row["fingerprints"]:
            owners.setdefault(fingerprint, set()).add(case)
    shared = {fp: sorted(cs) for fp, cs in owners.items() if len(cs) > 1}
    for case, row in table.items():
        print(f"{case:18} flagged {row['flagged']}/{row['runs']}  same fingerprint {row['most_common_share']}"
              f"  ({row['distinct_fingerprints']} distinct; lines {', '.join(row['lines'])})")
    print(f"fingerprints shared by two shapes: {shared or 'none'}")
    document = {"runs": len(runs), "cases": table, "shared": shared, "raw": runs}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=1) + "\n")
    print(f"wrote {latest.save('fingerprint_stability', 'latest', document)}")


if __name__ == "__main__":
    main()
