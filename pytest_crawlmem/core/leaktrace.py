"""A leak trace: the path from a root to what grows, one reference a line, as LeakCanary prints its leak traces (pure).

```
spider                                                              <- fingerprint
  .seen_pages    list, +107 entries in 112 responses                <- fingerprint
  [*]            2.6 KiB each (traced at the keeping line)
stored at examples/spiders.py:40 in Hoarder.parse: self.seen_pages.append(response.body[:2048])   <- fingerprint
```

The lines marked ``<- fingerprint`` are the references and the code the leak's fingerprint is built from
(core/fingerprint.py: the holder's path shape, the keeping code and its function); the others (the entries, their size,
the line number) can change without changing it. These records are report.json's ``growth.leak_trace``;
``core/tracebuild.py`` builds them from a result, :func:`trace_lines` renders one as plain text (the failure message,
``crawlmem report``), ``reports/html.py`` as HTML. Runs in any process.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_crawlmem.core.serial import JsonRecord

#: What marks a line whose reference or code the fingerprint is built from.
FINGERPRINT_MARK = "<- fingerprint"


@dataclass(frozen=True, slots=True)
class TraceHop(JsonRecord):
    """One line of a leak trace: the reference followed from the line above (the root's name on the first line) and
    what it reaches (``list, +107 entries in 112 responses``; '' when nothing is known of it)."""

    reference: str
    holds: str = ""
    in_fingerprint: bool = False  # the fingerprint's basis names this reference (its shape: no index, no size)


@dataclass(frozen=True, slots=True)
class LeakTrace(JsonRecord):
    """The path from a root to what a leak keeps growing, then the line that stores into it (or allocates it)."""

    hops: tuple[TraceHop, ...] = ()
    #: ``file:line`` of the line that keeps the leak: ``stored at`` (the line storing into the holder) or
    #: ``allocated at`` (the top growth site, when no storing line is known); '' when neither is.
    line: str = ""
    line_label: str = "stored at"
    code: str = ""  # that line's source as written (else the fingerprint's tokens of it)
    function: str = ""  # the qualified name of the function it is in
    code_in_fingerprint: bool = False  # the fingerprint's basis holds this code (never the line's number)
    source: str = ""  # what the path was read from: "holder" (grew while the crawl ran) or "retention" (alive after it)

    def __bool__(self) -> bool:
        return bool(self.hops or self.line)


def trace_lines(trace: LeakTrace, *, indent: str = "") -> list[str]:
    """The trace as plain text, one reference a line, the references and code the fingerprint is built from marked
    ``<- fingerprint`` in a column of their own."""
    rows: list[tuple[str, str]] = []
    width = max((len(hop.reference) for hop in trace.hops[1:]), default=0) + 2
    for depth, hop in enumerate(trace.hops):
        if depth == 0:
            text = hop.reference + (f"  {hop.holds}" if hop.holds else "")
        else:
            text = "  " + (hop.reference.ljust(width) + hop.holds if hop.holds else hop.reference)
        rows.append((text.rstrip(), FINGERPRINT_MARK if hop.in_fingerprint else ""))
    column = max((len(text) for text, mark in rows if mark), default=0) + 3  # the hops' marks in one column
    lines = [indent + (text.ljust(column) + mark if mark else text) for text, mark in rows]
    if trace.line:
        where = f"{trace.line_label} {trace.line}" + (f" in {trace.function}" if trace.function else "")
        where += f": {trace.code}" if trace.code else ""
        lines.append(indent + (f"{where.ljust(column - 3)}   {FINGERPRINT_MARK}" if trace.code_in_fingerprint else where))
    return lines


def trace_text(trace: LeakTrace, *, indent: str = "") -> str:
    """:func:`trace_lines` joined by newlines ('' for an empty trace)."""
    return "\n".join(trace_lines(trace, indent=indent))
