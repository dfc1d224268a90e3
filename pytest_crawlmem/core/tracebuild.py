"""A leak's trace built from what its verdict names: the holder's path (or the retention path), the line keeping it and
the fingerprint's basis, which says which of its references and code the fingerprint is built from (pure).

The holder's path ``spider.groups[…]['items'] -> 10 lists[415]`` becomes the hops ``spider``, ``.groups``, ``[…]``,
``['items']`` (``10 lists, 415 entries, +82 in 86 responses``) and ``[*]`` (what one entry costs, from the keeping
line's traced growth); a retention path ``class m.Kept .trees -> list[600] [599] -> SelectorList[1] [0] -> Selector``
the hops ``class m.Kept``, ``.trees`` (``list[600]``), ``[599]`` (``SelectorList[1]``), ``[0]`` (``Selector``).
Runs in any process.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

from pytest_crawlmem.core.leaktrace import FINGERPRINT_MARK, LeakTrace, TraceHop, trace_lines
from pytest_crawlmem.core.models import CrawlResult, GrowthSite, Holder, RetentionPath
from pytest_crawlmem.core.sites import source_line
from pytest_crawlmem.core.units import format_size

#: One step of a holder's pattern: an attribute, any key (``[…]``), a named key or an index.
_STEP = re.compile(r"""\.[A-Za-z_]\w*|\[…\]|\[(?:'[^']*'|"[^"]*"|[^\]]*)\]""")
#: What a holder path ends on: ``list[907]`` or ``10 lists[1,200]``.
_KIND = re.compile(r"^(?:(?P<containers>\d[\d,]*) )?(?P<kind>.+?)\[(?P<entries>[\d,]+)\]$")
#: One part of a retention path between `` -> ``: what it is, then the reference it follows (``list[600] [599]``).
_PART = re.compile(r"^(?P<what>.*?)(?: (?P<edge>\.\S+|\[.*\]|\(.*\)))?$")
_PREFIXED_ROOTS = ("module ", "class ")


def build_trace(
    basis: Sequence[str], *, holders: Sequence[Holder] = (), retention: Sequence[RetentionPath] = (),
    sites: Sequence[GrowthSite] = (),
) -> LeakTrace:
    """The trace of a leak whose fingerprint was built from ``basis`` (core/fingerprint.py's ``leak_basis``), from the
    holder it names first (else the first retention path) and the line keeping it (an empty trace when none is known)."""
    hashed = [part for part in basis if part.startswith(("function ", "code ", "file "))]
    function = next((part.removeprefix("function ") for part in basis if part.startswith("function ")), "")
    code = next((part.removeprefix("code ") for part in basis if part.startswith("code ")), "")
    holder = next((h for h in holders if h.line), holders[0] if holders else None)
    if holder is not None:
        keeping = next((s for s in sites if s.location == holder.line), None) if holder.line else None
        hops = holder_hops(holder, keeping, module=_module_of(holder.line or ""),
                           hashed=any(part.startswith("holder ") for part in basis))
        if holder.line:
            return LeakTrace(hops, holder.line, "stored at", _code(keeping, code), function, bool(hashed), "holder")
        top = sites[0] if sites else None  # no line of the user's code stores into it: where its growth was allocated
        return LeakTrace(hops, top.location if top else "", "allocated at", source_line(top) if top else "",
                         source="holder")
    retained = next((r for r in retention if r.path), None)
    user_site = next((s for s in sites if s.in_user_code), None)
    site_line = (user_site.location, "allocated at", _code(user_site, code), function, bool(hashed)) if user_site else (
        "", "stored at", "", "", False)
    if retained is not None and retained.path is not None:
        in_basis = any(part.startswith("retained ") for part in basis)
        return LeakTrace(retention_hops(retained.path, in_fingerprint=in_basis), *site_line, source="retention")
    return LeakTrace((), *site_line)


def trace_of(result: CrawlResult) -> LeakTrace | None:
    """A leak verdict's trace: the one its result holds, else built from its fingerprint's basis and evidence (a
    report.json written before traces were); ``None`` when the verdict is not a fingerprinted leak."""
    growth = result.growth
    if growth.leak_trace is not None or not growth.fingerprint:
        return growth.leak_trace
    trace = build_trace(growth.fingerprint_basis, holders=result.holders, retention=result.retention,
                        sites=result.top_growth)
    return trace or None


def leak_lines(result: CrawlResult, *, indent: str = "  ") -> list[str]:
    """The plain-text block under a leak verdict's sentence: its trace (headed by what the marks mean) and, for a known
    library leak, the entry and its upstream issue ([] when the verdict is not a fingerprinted leak)."""
    growth = result.growth
    trace = trace_of(result)
    lines = []
    if trace:
        lines.append(f"leak trace ({FINGERPRINT_MARK}: what fingerprint {growth.fingerprint} is built from):")
        lines += trace_lines(trace, indent=indent)
    if growth.known_leak is not None:
        lines.append(f"{growth.known_leak.describe()}: a leak of the library, not of this project's code")
    return lines


def holder_hops(
    holder: Holder, keeping: GrowthSite | None = None, *, module: str = "", hashed: bool = True,
) -> tuple[TraceHop, ...]:
    """The hops of a holder's path: its root, each step of its pattern (the last one with the container and what it
    gained), then ``[*]``, the entries, with what one costs when the keeping line's site (``keeping``) traced it.

    ``module``: the dotted module of the keeping line's file, which tells a ``module a.b.NAME`` root from its attribute
    (else the last dotted name is taken as the attribute). ``hashed``: the fingerprint's basis holds this path's shape.
    """
    left, _, right = holder.path.partition(" -> ")
    root, steps = split_root(left, module)
    grown = f"+{holder.gained:,} entries in {holder.responses:,} responses"
    match = _KIND.match(right.strip())
    if match is None:
        holds = f"{right.strip()}, {grown}" if right.strip() else grown
    elif match["containers"]:
        holds = f"{match['containers']} {match['kind'].removesuffix('s')}s, {match['entries']} entries, {grown}"
    else:
        holds = f"{match['kind']}, {grown}"
    hops = [TraceHop(root, "" if steps else holds, hashed)]
    hops += [TraceHop(step, holds if i == len(steps) - 1 else "", hashed) for i, step in enumerate(steps)]
    each = entry_size(keeping)
    if each:
        hops.append(TraceHop("[*]", each))
    return tuple(hops)


def entry_size(site: GrowthSite | None) -> str:
    """What one entry of a holder costs, from its keeping line's traced growth: ``4.1 KiB each (traced at the keeping
    line)`` ('' when it traced no new block)."""
    if site is None or site.size_diff_bytes <= 0 or site.count_diff <= 0:
        return ""
    return f"{format_size(site.size_diff_bytes / site.count_diff)} each (traced at the keeping line)"


def split_root(text: str, module: str = "") -> tuple[str, list[str]]:
    """A holder path's root and the steps of its pattern: ``spider.groups[…]['items']`` -> ``("spider", [".groups",
    "[…]", "['items']"])``; ``module a.b.KEPT`` -> ``("module a.b", [".KEPT"])`` (``module`` tells where a dotted
    module name ends; a class root keeps one more name, its class)."""
    prefix = next((p for p in _PREFIXED_ROOTS if text.startswith(p)), "")
    if not prefix:
        cut = min((i for i in (text.find("."), text.find("[")) if i >= 0), default=len(text))
        return text[:cut], _STEP.findall(text[cut:])
    rest = text[len(prefix):]
    bracket = rest.find("[")
    dotted, tail = (rest, "") if bracket < 0 else (rest[:bracket], rest[bracket:])
    names = dotted.split(".")
    known = module.split(".") if module else []
    tails = [known[i:] for i in range(len(known))]  # the file's module, or its tail (a path from a parent folder)
    named = next((len(t) for t in tails if names[:len(t)] == t and len(names) > len(t)), 0)
    keep = named or len(names) - 1
    if prefix == "class " and named and len(names) > keep + 1:
        keep += 1  # the class after its module
    keep = max(keep, 1)
    steps = [f".{name}" for name in names[keep:]] + _STEP.findall(tail)
    return prefix + ".".join(names[:keep]), steps


def retention_hops(path: str, *, in_fingerprint: bool = True) -> tuple[TraceHop, ...]:
    """The hops of a retention path (``class m.Kept .trees -> list[600] [599] -> Selector``): the root, then each
    reference with what it reaches; every reference is in the fingerprint when its basis holds the path's shape."""
    parts = [_PART.match(part.strip()) for part in path.split(" -> ")]
    hops: list[TraceHop] = []
    edge = ""
    for index, match in enumerate(parts):
        what, next_edge = (match["what"], match["edge"] or "") if match else ("", "")
        if index == 0:
            hops.append(TraceHop(what, "", in_fingerprint))
        else:
            hops.append(TraceHop(edge or "->", what, in_fingerprint))
        edge = next_edge
    return tuple(hops)


def _code(site: GrowthSite | None, tokens: str) -> str:
    """The line's source as written (its site's traceback), else the fingerprint's tokens of it."""
    text = source_line(site) if site is not None else ""
    return text or tokens


def _module_of(line: str) -> str:
    """The dotted module of a ``file:line`` (``pkg/spiders/shop.py:31`` -> ``pkg.spiders.shop``; '' for none)."""
    file = line.rpartition(":")[0]
    if not file.endswith(".py"):
        return ""
    parts = PurePath(file).with_suffix("").parts
    return ".".join(p for p in parts if p not in ("/", "..", "."))
