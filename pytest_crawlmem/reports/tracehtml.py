"""A leak trace (core/leaktrace.py) and a known library leak as report.html's markup, every string escaped (any process).

One reference a line, indented under its root; what the fingerprint is built from is underlined and tagged
``fingerprint``, as LeakCanary underlines the suspect references of its leak traces.
"""

from __future__ import annotations

from html import escape

from pytest_crawlmem.core.known_leaks import KnownLeakMatch
from pytest_crawlmem.core.leaktrace import LeakTrace

#: report.html's styles for the trace (added to its stylesheet).
TRACE_CSS = """
ol.leak-trace { list-style:none; margin:6px 0 2px; padding:6px 10px; background:var(--bg); border-radius:6px; }
ol.leak-trace li { margin:0; }
ol.leak-trace li.hop { padding-left:20px; }
ol.leak-trace li.in-fp > code.ref, ol.leak-trace li.in-fp > code.src {
  text-decoration:underline wavy #b42318; text-underline-offset:3px; }
ol.leak-trace .fp-tag { color:#b42318; font-size:11px; margin-left:6px; }
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def trace_html(trace: LeakTrace, fingerprint: str = "") -> str:
    """The trace as an ordered list: the root, one hop a line, then the line keeping the leak ('' for an empty trace)."""
    if not trace:
        return ""
    tag = '<span class="fp-tag">fingerprint</span>'
    items = []
    for depth, hop in enumerate(trace.hops):
        css = ("root" if depth == 0 else "hop") + (" in-fp" if hop.in_fingerprint else "")
        holds = f" {_e(hop.holds)}" if hop.holds else ""
        items.append(f'<li class="{css}"><code class="ref">{_e(hop.reference)}</code>{holds}'
                     f"{tag if hop.in_fingerprint else ''}</li>")
    if trace.line:
        css = "line" + (" in-fp" if trace.code_in_fingerprint else "")
        function = f" in <code>{_e(trace.function)}</code>" if trace.function else ""
        code = f': <code class="src">{_e(trace.code)}</code>' if trace.code else ""
        items.append(f'<li class="{css}">{_e(trace.line_label)} <code>{_e(trace.line)}</code>{function}{code}'
                     f"{tag if trace.code_in_fingerprint else ''}</li>")
    legend = (f'<span class="muted">leak trace: underlined, what fingerprint <code>{_e(fingerprint)}</code> is built'
              " from</span>" if fingerprint else '<span class="muted">leak trace</span>')
    return f'{legend}<ol class="leak-trace">{"".join(items)}</ol>'


def known_leak_html(known: KnownLeakMatch | None) -> str:
    """A known library leak's line with its upstream issue as a link ('' for the team's own leak)."""
    if known is None:
        return ""
    link = f'<a href="{_e(known.issue)}">{_e(known.issue)}</a>' if known.issue.startswith("https://") else _e(known.issue)
    return (f'<br><span class="badge muted">known library leak</span> <code>{_e(known.key)}</code>'
            f" ({_e(known.library)} {_e(known.installed)}, in {_e(known.versions)}): {_e(known.summary)};"
            f" upstream: {link}")
