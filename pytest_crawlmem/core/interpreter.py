"""Which interpreter measured a crawl, and whether two measurements can be compared (pure).

Memory figures are comparable only within one interpreter build: CPython 3.14.0-3.14.4 shipped an incremental garbage
collector that 3.14.5 reverted (a fetch loop settled near 420 MB on 3.14.2 against 80 MB on 3.14.0), a free-threaded
build collects later, and a project that calls ``gc.set_threshold`` changes when collections run. Reports and baselines
record ``{"implementation", "version", "free_threaded", "gc_threshold"}`` (read by ``reports/report.py``); a comparison
across two that differ says so instead of reporting a regression.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The facts of an interpreter that make memory figures comparable, in the order they are named.
KEYS = ("implementation", "version", "free_threaded", "gc_threshold")


def describe(info: Mapping[str, Any]) -> str:
    """``CPython 3.11.7 (GIL, gc threshold 700/10/10)``; ``free-threaded`` for a build without the GIL."""
    name = {"cpython": "CPython", "pypy": "PyPy"}.get(str(info.get("implementation")), str(info.get("implementation", "?")))
    build = "free-threaded" if info.get("free_threaded") else "GIL"
    threshold = info.get("gc_threshold")
    gc = "/".join(str(x) for x in threshold) if isinstance(threshold, (list, tuple)) else "?"
    return f"{name} {info.get('version', '?')} ({build}, gc threshold {gc})"


def _comparable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def differences(saved: Mapping[str, Any], here: Mapping[str, Any]) -> list[str]:
    """``version '3.12.1' then, '3.11.7' here`` for each fact of :data:`KEYS` both sides recorded and that differs."""
    return [f"{key} {_comparable(saved[key])!r} then, {_comparable(here[key])!r} here" for key in KEYS
            if key in saved and key in here and _comparable(saved[key]) != _comparable(here[key])]


def other_interpreter(runs: Sequence[Mapping[str, Any]], here: Mapping[str, Any]) -> str | None:
    """When every saved run that recorded its interpreter ran on another one than ``here``: the sentence saying so
    (``None`` when one matches, or no run recorded it: runs saved before interpreters were recorded)."""
    recorded = [run["interpreter"] for run in runs if isinstance(run.get("interpreter"), Mapping)]
    if not recorded or any(not differences(saved, here) for saved in recorded):
        return None
    saved = recorded[-1]
    return (f"the baseline's runs were measured on {describe(saved)}, this one on {describe(here)}"
            f" ({'; '.join(differences(saved, here))}): memory figures are comparable only within one interpreter build,"
            " so this is not judged a regression; save a baseline with this interpreter")
