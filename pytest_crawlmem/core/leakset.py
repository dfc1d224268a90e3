"""Leaks new against a control: the leaks of a treatment run whose fingerprints the control does not have (pure).

As memlab's ``diff-leaks`` judges a change on the leaks it added, a pull request is judged on the fingerprints
(core/fingerprint.py) its run has and its control (the main branch's run, or a saved baseline) has not. A leak is
known by its fingerprint wherever it shows, in any test: a leak that moved to another test is still the same leak.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Leak:
    """One leak verdict of one crawl: its fingerprint and where a reviewer finds it."""

    fingerprint: str
    test: str  # the test id (``ID [crawl 2]`` for a test's second crawl), or the report's source
    verdict: str = ""
    where: str = ""  # the line the verdict names first
    basis: tuple[str, ...] = ()  # what the fingerprint hashes
    source: str = ""  # the report dir or baseline file it was read from
    library: str = ""  # a known library leak's line (core/libleaks.py): not the team's own leak

    def describe(self) -> str:
        """``3f2a9c1b7d4e5f60 retained-objects in test_a.py::test_b at spiders.py:40 (holder spider.kept -> list)``."""
        text = f"{self.fingerprint} {self.verdict or 'leak'} in {self.test}"
        if self.where:
            text += f" at {self.where}"
        holder = next((part for part in self.basis if part.startswith(("holder ", "retained "))), "")
        return text + (f" ({holder})" if holder else "")


@dataclass(frozen=True, slots=True)
class LeakDiff:
    """The leaks of a treatment sorted against its control's by fingerprint."""

    new: tuple[Leak, ...]  # in the treatment only: what the change added
    known: tuple[Leak, ...]  # in both
    gone: tuple[Leak, ...]  # in the control only: fixed, or not reached by the treatment
    library: tuple[Leak, ...] = ()  # the treatment's known library leaks (core/known_leaks.py): listed apart, never new

    @property
    def has_new(self) -> bool:
        """Whether the treatment added a leak (the command's exit status 1)."""
        return bool(self.new)


def _firsts(leaks: Iterable[Leak]) -> dict[str, Leak]:
    """One leak per fingerprint (the first seen), in the order seen."""
    found: dict[str, Leak] = {}
    for leak in leaks:
        found.setdefault(leak.fingerprint, leak)
    return found


def diff_leaks(control: Iterable[Leak], treatment: Iterable[Leak]) -> LeakDiff:
    """Sort the treatment's leaks into new (fingerprint not in the control) and known, and list the control's gone;
    a known library leak of the treatment is listed apart, new or not (it is not the team's code)."""
    before, after = _firsts(control), _firsts(treatment)
    own = {fp: leak for fp, leak in after.items() if not leak.library}
    return LeakDiff(
        new=tuple(leak for fp, leak in own.items() if fp not in before),
        known=tuple(leak for fp, leak in own.items() if fp in before),
        gone=tuple(leak for fp, leak in before.items() if fp not in after),
        library=tuple(leak for leak in after.values() if leak.library),
    )


def leaks_of_runs(runs: Mapping[str, Sequence[Mapping[str, Any]]], *, source: str = "", newest_only: bool = False) -> list[Leak]:
    """The leaks saved in a baseline's runs (``{test id: [run figures, ...]}``): every run's, or each test's newest run's
    (a treatment saved as a baseline is judged on its last run)."""
    leaks = []
    for test, saved in sorted(runs.items()):
        for run in (saved[-1:] if newest_only else saved):
            fingerprint = run.get("leak_fingerprint")
            if isinstance(fingerprint, str) and fingerprint:
                leaks.append(Leak(fingerprint, test, str(run.get("verdict") or ""), str(run.get("leak_where") or ""),
                                  source=source, library=str(run.get("known_leak") or "")))
    return leaks


def format_diff(diff: LeakDiff, control: str, treatment: str) -> list[str]:
    """The lines ``crawlmem diff --new-leaks`` prints: the new leaks first, then the known and the gone ones."""
    lines = [f"control:   {control}", f"treatment: {treatment}", ""]
    if diff.new:
        lines.append(f"{len(diff.new)} new leak{'s' if len(diff.new) != 1 else ''} in the treatment"
                     " (fingerprints the control does not have):")
        lines += [f"  NEW   {leak.describe()}" for leak in diff.new]
    else:
        lines.append("no new leak: every leak of the treatment has a fingerprint the control has")
    lines += [f"  known {leak.describe()}" for leak in diff.known]
    lines += [f"  gone  {leak.describe()}" for leak in diff.gone]
    if diff.library:
        lines += ["", f"{len(diff.library)} known library leak{'s' if len(diff.library) != 1 else ''} in the treatment"
                      " (leaks of Scrapy or its libraries, not counted as new):"]
        lines += [f"  library {leak.describe()}: {leak.library}" for leak in diff.library]
    return lines
