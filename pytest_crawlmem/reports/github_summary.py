"""The test run's crawl table and failures as GitHub-flavoured Markdown, for ``$GITHUB_STEP_SUMMARY`` (pytest process).

GitHub Actions shows what a step appends to the file ``$GITHUB_STEP_SUMMARY`` on the run's summary page, up to 1 MiB a
step (a step over it shows an error instead). :func:`step_summary` builds the Markdown within a byte budget: the crawl
table first (one row a crawl), then each failure in a fenced block, each cut at :data:`FAILURE_BYTES`; what does not
fit is left out with a line saying how much and where the rest is. :func:`append_step_summary` appends it, counting
what earlier commands of the step already wrote against the limit.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

#: GitHub's limit on one step's summary (bytes).
STEP_SUMMARY_LIMIT = 1024 * 1024
#: What this writer leaves unused below the limit (a shell line of the same step may add to the file after it).
HEADROOM = 16 * 1024
#: A failure's text in the summary is cut at this many bytes (the terminal and the reports keep it whole).
FAILURE_BYTES = 4 * 1024
#: Bytes kept back for the lines saying what was left out.
_RESERVE = 1024


def cell(text: str) -> str:
    """One table cell: ``|`` escaped, HTML made inert, line breaks as ``<br>``; empty cells as ``-``."""
    text = html.escape(str(text), quote=False).replace("|", "\\|")
    return "<br>".join(text.splitlines()) or "-"


def table_row(cells: Sequence[str]) -> str:
    """A GFM table row."""
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, with a line saying it was."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", errors="ignore").rstrip() + "\n... (cut here: the whole text is in the job's log)"


def failure_block(test: str, text: str) -> str:
    """One failure: the test id, then its text (cut at :data:`FAILURE_BYTES`) in a fenced block."""
    body = _cut(text.strip("\n"), FAILURE_BYTES)
    fence = _fence(body)
    return f"#### `{test.replace('`', '')}`\n\n{fence}text\n{body}\n{fence}\n"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def step_summary(
    header: Sequence[str], rows: Sequence[Sequence[str]], failures: Sequence[tuple[str, str]], *,
    notes: Sequence[str] = (), report_dir: str = "", limit_bytes: int = STEP_SUMMARY_LIMIT - HEADROOM,
) -> str:
    """The Markdown for the step summary, at most ``limit_bytes`` UTF-8 bytes: a ``crawl memory`` heading, the crawl
    table (GFM), the notes, then ``failures`` (``(test id, text)``), each in a fenced block."""
    budget = limit_bytes - _RESERVE
    if budget <= 0:
        return ""
    lines = ["## crawl memory", ""]
    shown = 0
    if rows:
        lines += [table_row(header), "|" + "|".join("---" for _ in header) + "|"]
        used = _size("\n".join(lines))
        for row in rows:
            line = table_row(row)
            if used + _size(line) + 1 > budget * 3 // 4:  # the table may take three quarters: failures come next
                break
            lines.append(line)
            used += _size(line) + 1
            shown += 1
    lines.append("")
    if shown < len(rows):
        lines += [f"*{len(rows) - shown:,} more crawls not shown ({shown:,} of {len(rows):,}): GitHub keeps 1 MiB of a"
                  " step's summary; every crawl is in the terminal summary" + (f" and under `{report_dir}`" if report_dir
                                                                                 else "") + ".*", ""]
    elif report_dir:
        lines += [f"{len(rows):,} crawl{'s' if len(rows) != 1 else ''}; reports under `{report_dir}`.", ""]
    for note in notes:
        candidate = f"- {cell(note)}"
        if _size("\n".join(lines)) + _size(candidate) + 1 > budget * 3 // 4:
            lines += [f"*... {len(notes):,} notes in all: the rest are in the terminal summary.*"]
            break
        lines.append(candidate)
    if notes:
        lines.append("")
    text = "\n".join(lines)
    if failures:
        text += f"\n### Failures ({len(failures):,})\n\n"
        for index, (test, message) in enumerate(failures):
            block = failure_block(test, message)
            if _size(text) + _size(block) + 1 > budget:
                text += (f"\n*{len(failures) - index:,} more failures not shown: GitHub keeps 1 MiB of a step's summary;"
                         " they are in the job's log.*\n")
                break
            text += block + "\n"
    return text


def append_step_summary(path: Path, header: Sequence[str], rows: Sequence[Sequence[str]],
                        failures: Sequence[tuple[str, str]], *, notes: Sequence[str] = (), report_dir: str = "") -> int:
    """Append :func:`step_summary` to ``path`` within what the step's earlier output left of the limit; return the bytes
    written (0 when nothing fits)."""
    try:
        used = path.stat().st_size
    except OSError:
        used = 0
    text = step_summary(header, rows, failures, notes=notes, report_dir=report_dir,
                        limit_bytes=STEP_SUMMARY_LIMIT - HEADROOM - used)
    if not text:
        return 0
    with path.open("a", encoding="utf-8") as out:
        out.write(("\n" if used else "") + text)
    return _size(text) + (1 if used else 0)
