"""Growth a team declares by design: ``expected_growth={HOLDER: SIZE}`` parsed, checked and described (pure, any process).

A dedup set or a first-seen index grows per item on purpose. The ``expected_growth`` budget (marker keyword, ini key
``crawlmem_expected_growth``, Scrapy setting ``CRAWLMEM_EXPECTED_GROWTH``) names each such holder as a leak verdict
names it (``spider.seen_ids``, ``pipeline DuplicatesPipeline.ids_seen``, ``module mypkg.cache._MEMO``) with the growth
per response it may have. The crawl measures each declared holder at every drained checkpoint (``attribution/declared.py``);
``core/setaside.py`` takes its growth out of the memory the verdict judges, up to the declared size, and names it as a
leak past that. This module holds the vocabulary: parsing (``HOLDER=SIZE, ...``), the per-holder outcome record, and
the sentences a verdict's reason says about them. A leaf: it imports only units and serial.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_crawlmem.core.serial import JsonRecord
from pytest_crawlmem.core.units import UnitError, format_size, parse_size

#: ``((holder, bytes per response), ...)``: the declared holders of one test, in the order they were written.
Declared = tuple[tuple[str, int], ...]

#: The roots a holder is named from, as verdicts name them (probes/readings.py's ``crawl_roots``, attribution's modules
#: and classes): a component root takes its class name, a module or class root a dotted path.
COMPONENT_ROOTS = ("pipeline", "spider middleware", "downloader middleware", "extension")
DOTTED_ROOTS = ("module", "class")
_IDENT = r"[A-Za-z_]\w*"
_STEPS = r"(?:\.[A-Za-z_]\w*|\[[^\]]*\])+"
_HOLDER = re.compile(
    rf"^(?:spider{_STEPS}"
    rf"|(?:{'|'.join(COMPONENT_ROOTS)}) {_IDENT}{_STEPS}"
    rf"|module {_IDENT}(?:\.{_IDENT})*{_STEPS}"
    rf"|class {_IDENT}(?:\.{_IDENT})+{_STEPS})$"
)
#: How a holder is written, for messages.
HOLDER_FORMS = ("spider.ATTR, pipeline CLASS.ATTR (also spider middleware, downloader middleware, extension),"
                " module NAME.ATTR or class MODULE.CLASS.ATTR")
EXAMPLE = "spider.seen_ids=600 B, pipeline DuplicatesPipeline.ids_seen=1 KiB"


def parse_expected_growth(value: object, *, source: str = "expected_growth") -> Declared:
    """``value`` (a dict ``{HOLDER: SIZE}``, or text ``HOLDER=SIZE, HOLDER=SIZE``, commas or new lines between
    entries) as :data:`Declared`; UnitError naming the value and ``source``.

    A holder may be written as the verdict prints it, ``spider.seen_ids -> set[907]``: what follows `` -> `` is
    dropped. SIZE is a size per response (``600 B``, ``1.5 KiB``, bytes), above 0. An empty dict or text declares
    nothing (a marker's ``expected_growth={}`` overrides an ini default).
    """
    if isinstance(value, Mapping):
        pairs = [(key, size) for key, size in value.items()]
    elif isinstance(value, str):
        pairs = [_split_entry(entry, value, source) for entry in _entries(value)]
    else:
        raise UnitError(f"invalid value {value!r} for {source}: expected a dict {{HOLDER: SIZE}} or text"
                        f" 'HOLDER=SIZE, ...' such as '{EXAMPLE}'")
    declared: dict[str, int] = {}
    for holder, size in pairs:
        name = _holder(holder, value, source)
        if name in declared:
            raise UnitError(f"invalid value {value!r} for {source}: {name!r} is declared twice")
        declared[name] = _size(name, size, value, source)
    return tuple(declared.items())


def _entries(text: str) -> list[str]:
    """The entries of ``text``, split at commas and new lines outside brackets (a key may hold a comma)."""
    entries, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char in ",\n" and depth <= 0:
            entries.append(current)
            current = ""
        else:
            current += char
    entries.append(current)
    return [entry.strip() for entry in entries if entry.strip()]


def _split_entry(entry: str, whole: str, source: str) -> tuple[str, str]:
    holder, equals, size = entry.rpartition("=")
    if not equals or not holder.strip():
        raise UnitError(f"invalid entry {entry!r} in {whole!r} for {source}: expected HOLDER=SIZE,"
                        f" as in '{EXAMPLE}'")
    return holder, size


def _holder(holder: object, whole: object, source: str) -> str:
    """The holder's name, checked against the forms a verdict names holders in."""
    if not isinstance(holder, str):
        raise UnitError(f"invalid value {whole!r} for {source}: the holder {holder!r} is not text")
    name = " ".join(holder.split(" -> ", 1)[0].split())
    if not _HOLDER.match(name):
        raise UnitError(f"invalid value {whole!r} for {source}: the holder {name!r} is not named as a"
                        f" verdict names one: expected {HOLDER_FORMS}, e.g. '{EXAMPLE}'")
    return name


def _size(name: str, size: object, whole: object, source: str) -> int:
    text = size.strip() if isinstance(size, str) else size
    negative = text.startswith("-") if isinstance(text, str) else (
        isinstance(text, (int, float)) and not isinstance(text, bool) and text < 0)
    if negative:
        raise UnitError(f"invalid value {whole!r} for {source}: the size of {name} must not be negative")
    try:
        parsed = parse_size(text, source=name)
    except UnitError as exc:
        raise UnitError(f"invalid value {whole!r} for {source}: {exc} (a size per response, as in '{EXAMPLE}')") from None
    if parsed <= 0:
        raise UnitError(f"invalid value {whole!r} for {source}: the size of {name} must be above 0 (the"
                        " growth per response it may have; leave a holder out to declare none)")
    return parsed


def setting_text(declared: Declared) -> str:
    """``declared`` as the text ``CRAWLMEM_EXPECTED_GROWTH`` takes, sizes in bytes (``spider.seen_ids=600``)."""
    return ", ".join(f"{holder}={size}" for holder, size in declared)


def describe_limit(value: object) -> str:
    """A declaration as report.html's budget table shows it: ``spider.seen_ids up to 600 B/response`` (``value`` as the
    budget holds it, or as report.json gives it back: a list of pairs)."""
    pairs = list(value.items()) if isinstance(value, Mapping) else list(value) if isinstance(value, (list, tuple)) else []
    shown = [f"{pair[0]} up to {format_size(pair[1])}/response" for pair in pairs
             if isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[1], (int, float))]
    return ", ".join(shown) or "none"


@dataclass(frozen=True, slots=True)
class DeclaredGrowth(JsonRecord):
    """One declared holder as the verdict judged it: its declaration, its measured growth per response over the judged
    checkpoints, whether it grew beyond the declaration, and what was set aside."""

    holder: str  # as declared: "spider.seen_ids"
    declared_per_response_bytes: int
    per_response_bytes: float | None = None  # None: not measured at enough drained checkpoints
    over: bool = False  # grew beyond its declaration: a leak, named as such
    found: bool = True  # False: the holder was found at no checkpoint (a misspelt name, an attribute never set)
    set_aside_bytes: int = 0  # memory taken out of the judged signal at the last checkpoint

    def describe(self) -> str:
        """``spider.seen_ids 512 B/response (declared up to 600 B)``, or why nothing was set aside."""
        limit = format_size(self.declared_per_response_bytes)
        if not self.found:
            return (f"{self.holder} not found at any checkpoint (nothing set aside; name it as a verdict does:"
                    f" {HOLDER_FORMS})")
        if self.per_response_bytes is None:
            return f"{self.holder} (declared up to {limit}; too few drained checkpoints to measure its rate)"
        return f"{self.holder} {format_size(self.per_response_bytes)}/response (declared up to {limit})"

    def describe_over(self) -> str:
        """``spider.seen_ids grew 2.1 KiB/response, over its declared 600 B/response``."""
        return (f"{self.holder} grew {format_size(self.per_response_bytes or 0.0)}/response, over its declared"
                f" {format_size(self.declared_per_response_bytes)}/response")


def set_aside_sentence(outcomes: Iterable[DeclaredGrowth]) -> str:
    """``set aside as declared: spider.seen_ids 512 B/response (declared up to 600 B), ...`` ('' when none)."""
    within = [o.describe() for o in outcomes if not o.over]
    return f"set aside as declared: {', '.join(within)}" if within else ""


def holder_name(path: str) -> str:
    """The holder a verdict's path names: ``spider.seen_ids`` of ``spider.seen_ids -> set[907]``."""
    return path.split(" -> ", 1)[0].strip()


def is_declared(path: str, holder: str) -> bool:
    """Whether the holder named by ``path`` is ``holder`` or lies inside it (``spider.seen_ids[…]``)."""
    name = holder_name(path)
    return name == holder or (name.startswith(holder) and name[len(holder)] in ".[")


def declared_of(path: str, outcomes: Sequence[DeclaredGrowth]) -> DeclaredGrowth | None:
    """The declared holder ``path`` names, if any."""
    return next((o for o in outcomes if is_declared(path, o.holder)), None)
