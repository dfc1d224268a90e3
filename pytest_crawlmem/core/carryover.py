"""State a spider class carries from one crawl to the next in one process (pure: no pytest, no Scrapy; any process).

A container kept on the class (``seen = set()`` in its body) outlives the spider: a second crawl of the same class
in the same pytest process starts with what the first one put there, and a dedup set then drops every item. Before
and after each in-process crawl the harness reads the sizes of the mutable containers on the spider class and its
bases outside Scrapy (:func:`class_containers`); :class:`CarryOver` remembers which crawl filled which container and
names one that a later crawl started with when that crawl got far less than the one that filled it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Modules whose classes are not the project's: their class attributes are not read.
FOREIGN_MODULES = frozenset({"builtins", "scrapy", "scrapy_redis", "scrapy_playwright", "twisted"})
#: A later crawl that got less than this share of the items (or responses) of the crawl that filled the container.
FAR_FEWER = 0.5


@dataclass(frozen=True)
class Container:
    """One mutable container on a class: ``Owner.attribute``, its type's name and its size."""

    owner: str
    attribute: str
    kind: str
    size: int

    @property
    def name(self) -> str:
        """``Dedup.seen``."""
        return f"{self.owner}.{self.attribute}"


#: The containers of a spider class, by ``module:Owner.attribute``.
Snapshot = Mapping[str, Container]


def class_containers(spider_cls: type) -> dict[str, Container]:
    """The mutable containers on ``spider_cls`` and its bases outside Scrapy, with their sizes (any process)."""
    found: dict[str, Container] = {}
    for klass in spider_cls.__mro__:
        module = getattr(klass, "__module__", "") or ""
        if module.split(".")[0] in FOREIGN_MODULES:
            continue
        for attribute, value in list(vars(klass).items()):
            if attribute.startswith("__") or not _plain_container(value):
                continue
            key = f"{module}:{klass.__qualname__}.{attribute}"
            found.setdefault(key, Container(klass.__qualname__, attribute, type(value).__name__, len(value)))
    return found


def _plain_container(value: object) -> bool:
    """A list, dict, set, deque or bytearray of the standard library (defaultdict, Counter, ...): ``len()`` on it runs
    none of the project's code."""
    return isinstance(value, (list, dict, set, deque, bytearray)) and type(value).__module__ in ("builtins", "collections")


@dataclass(frozen=True)
class Filling:
    """A crawl that left a class container bigger than it found it."""

    test_id: str
    items: int
    responses: int
    size: int  # the container's size when that crawl ended


@dataclass
class CarryOver:
    """Per pytest process: which crawl filled which class container, and the notes for later crawls it affects."""

    filled: dict[str, Filling] = field(default_factory=dict)
    crawls: int = 0  # in-process crawls so far

    def after_crawl(self, test_id: str, before: Snapshot, after: Snapshot, *, items: int, responses: int) -> list[str]:
        """Record what this crawl filled; return a sentence per container an earlier crawl filled and this one started
        with, when this crawl got far fewer items or responses than that one."""
        notes = [note for key, container in before.items()
                 if (note := self._note(key, container, items, responses)) is not None]
        for key, container in after.items():
            if container.size > (before[key].size if key in before else 0):
                self.filled[key] = Filling(test_id, items, responses, container.size)
        self.crawls += 1
        return notes

    def _note(self, key: str, container: Container, items: int, responses: int) -> str | None:
        filling = self.filled.get(key)
        if filling is None or not container.size:
            return None
        if filling.items and items < filling.items * FAR_FEWER:
            got = f"scraped {items:,} items (that one {filling.items:,})"
        elif filling.responses and responses < filling.responses * FAR_FEWER:
            got = f"got {responses:,} responses (that one {filling.responses:,})"
        else:
            return None
        return (f"{container.name} (a {container.kind} on the class) still held {container.size:,} entries from an"
                f" earlier crawl in this process ({filling.test_id}); this crawl {got}: keep such state on the"
                " instance (set it in __init__) or clear it when the spider closes, or use crawl(isolate=True)")
