"""The markup report pages share: escaping, tables, sections, the page around them and its style sheet (pure).

Every string that came from a crawl is escaped here (``esc``); the page forbids scripts and remote loads in its
Content-Security-Policy. Used by report.html (``html``), the sweep's and the cluster's pages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from pytest_crawlmem.core.units import format_size
from pytest_crawlmem.reports.jsonl import is_number
from pytest_crawlmem.reports.tracehtml import TRACE_CSS


class Safe(str):
    """Markup built here from escaped parts: inserted as is."""


def esc(value: object) -> str:
    """Escape any value for HTML text or a quoted attribute."""
    return value if isinstance(value, Safe) else escape(str(value), quote=True)


def number_of(value: object) -> float | None:
    """A figure as a float, or ``None`` when it was not measured."""
    return float(value) if is_number(value) else None


def size(value: object) -> str:
    """A size for people, or ``-`` when it was not measured."""
    number = number_of(value)
    return "-" if number is None else format_size(number)


def count(value: object) -> str:
    """A count with thousands separators, or ``-``."""
    number = number_of(value)
    return "-" if number is None else f"{number:,.0f}"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, cls: str = "") -> Safe:
    """An HTML table; cells are escaped unless they are :class:`Safe`."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return Safe(f'<table class="{esc(cls)}">{thead}<tbody>{body}</tbody></table>')


def section(title: str, body: str, *, note: str = "") -> Safe:
    """A titled block of the page."""
    extra = f'<p class="note">{esc(note)}</p>' if note else ""
    anchor = "-".join(title.lower().split())
    return Safe(f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{extra}{body}</section>')


def page(title: str, body: str) -> str:
    """The document around ``body``: no script, nothing loaded from anywhere."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style></head>\n<body><main>\n{body}\n</main></body></html>\n"
    )

CSS = """
:root { --ink:#1d2430; --muted:#5f6b7a; --line:#dde3ea; --bg:#f6f8fa; --pass:#1e7d3a; --fail:#b42318; --warn:#a15c00; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink);
       font:14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width:1180px; margin:0 auto; padding:20px 24px 48px; }
header, section { background:#fff; border:1px solid var(--line); border-radius:8px; padding:16px 20px; margin-bottom:16px; }
h1 { font-size:20px; margin:2px 0 8px; word-break:break-all; }
h2 { font-size:16px; margin:0 0 10px; }
.kicker { margin:0; color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.04em; }
.verdict { font-size:15px; margin:8px 0; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; color:#fff;
         vertical-align:1px; }
.badge.pass { background:var(--pass); } .badge.fail { background:var(--fail); } .badge.warn { background:var(--warn); }
.badge.muted { background:#7a8594; }
.banner { background:#fff7e6; border:1px solid #f0c36d; border-radius:6px; padding:8px 12px; }
.banner ul { margin:4px 0 0; padding-left:20px; }
.note { color:var(--muted); margin:0 0 8px; }
.files { color:var(--muted); font-size:13px; }
table.glance { margin:10px 0 4px; font-size:14px; }
table.glance td:first-child { width:130px; color:var(--muted); font-weight:600; white-space:nowrap; }
table.glance ul { margin:0; padding-left:18px; }
table.glance code.src { background:var(--bg); padding:0 4px; border-radius:4px; }
.muted { color:var(--muted); }
.figures { display:grid; grid-template-columns:repeat(7, 1fr); gap:8px; margin-top:12px; }
.figure { background:var(--bg); border-radius:6px; padding:6px 10px; }
.figure .label { color:var(--muted); font-size:11px; text-transform:uppercase; letter-spacing:.03em; }
.figure .value { font-size:15px; font-weight:600; font-variant-numeric:tabular-nums; }
table { border-collapse:collapse; width:100%; font-variant-numeric:tabular-nums; }
th, td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:12px; }
table.checkpoints td { font-size:12.5px; white-space:nowrap; padding:5px 6px; }
table.checkpoints th { padding:5px 6px; }
table.checkpoints td:nth-child(9), table.checkpoints td:nth-child(10), table.checkpoints td:last-child { white-space:normal; }
.scroll { overflow-x:auto; }
table.env, table.counts { width:auto; min-width:320px; }
code { font:12.5px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; word-break:break-all; }
pre { background:var(--bg); padding:8px 10px; border-radius:6px; overflow-x:auto; font-size:12px; white-space:pre-wrap; }
details summary { cursor:pointer; }
.empty { color:var(--muted); margin:0; }
.violations { margin:0; padding-left:18px; }
.chart > input { position:absolute; opacity:0; }
.chart > label { display:inline-block; padding:3px 12px; border:1px solid var(--line); cursor:pointer; font-size:13px;
                 margin-right:-1px; }
.chart > label:first-of-type { border-radius:6px 0 0 6px; } .chart > label:last-of-type { border-radius:0 6px 6px 0; }
.chart > input:checked + label { background:var(--ink); color:#fff; border-color:var(--ink); }
.by-time { display:none; }
#x-time:checked ~ .by-time { display:block; } #x-time:checked ~ .by-responses { display:none; }
svg.timeline { width:100%; height:auto; display:block; margin-top:8px; font-family:system-ui, sans-serif; }
svg .panel-title { font-size:13px; font-weight:600; fill:var(--ink); }
svg .legend, svg .tick, svg .axis-label { font-size:11px; fill:var(--muted); }
svg .axis-label { font-size:12px; }
svg .plot { fill:#fff; stroke:var(--line); }
svg .grid { stroke:#eef1f4; }
svg .axis { stroke:#9aa5b1; }
svg .warmup { fill:#e9edf2; opacity:.7; }
svg .warmup-label { font-size:11px; fill:#7a8594; }
svg .marker { stroke:#9aa5b1; stroke-width:1; }
svg .marker.undrained { stroke:#e69f00; stroke-dasharray:4 3; }
svg .marker.warmup { stroke:#5f6b7a; stroke-dasharray:5 3; stroke-width:1.5; }
svg .marker.danger { stroke:#d55e00; stroke-width:2; }
svg .marker.governor { stroke:#0072b2; stroke-width:2; stroke-opacity:.6; }
svg .marker.governor.restore { stroke:#009e73; }
svg .band.governed { fill:#0072b2; fill-opacity:.08; }
svg .band.rotation { fill:#cc79a7; fill-opacity:.14; }
.swatch.band-governed { background:rgba(0,114,178,.16); }
.swatch.band-rotation { background:rgba(204,121,167,.28); }
.swatch.danger { border-left:2px solid #d55e00; width:1px; height:14px; margin:0 10px 0 8px; vertical-align:-3px; }
.swatch.governor { border-left:2px solid #0072b2; width:1px; height:14px; margin:0 10px 0 8px; vertical-align:-3px; }
svg polyline.series { stroke-width:1.8; stroke-linejoin:round; }
svg .budget { stroke-dasharray:6 4; stroke-width:1.5; }
svg .budget-label { font-size:11px; fill:#c0392b; font-weight:600; }
svg .budget-note { font-size:10px; fill:#c0392b; }
ul.legend { list-style:none; padding:0; margin:6px 0 0; display:flex; gap:18px; flex-wrap:wrap; color:var(--muted);
            font-size:12px; }
.swatch { display:inline-block; width:18px; height:10px; margin-right:6px; vertical-align:-1px; }
.swatch.warmup { background:#e9edf2; border:1px solid #c9d1da; }
.swatch.checkpoint { border-left:1px solid #9aa5b1; width:1px; height:14px; margin:0 10px 0 8px; vertical-align:-3px; }
.swatch.undrained { border-left:2px dashed #e69f00; width:1px; height:14px; margin:0 10px 0 8px; vertical-align:-3px; }
.swatch.budget { border-top:2px dashed #c0392b; height:2px; vertical-align:3px; }
@media (max-width: 900px) { .figures { grid-template-columns:repeat(3, 1fr); } }
""" + TRACE_CSS
