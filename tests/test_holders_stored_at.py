""""Stored at" is the line that stores into the entry that grew, and the places Python itself keeps things are searched
(pure: real objects and this file's own source, no engine): a list handed on in ``request.meta`` beside a middleware
writing another key of the same dicts, groups created on one line and filled on another through a local, a
``defaultdict`` filled on access, a ``queue.Queue`` nobody drains, a logger per product in the logging registry; what
the holder's entries keep is measured, wherever they were allocated (issue 54)."""

from __future__ import annotations

import logging
import queue
import threading
from collections import defaultdict
from typing import Any

from scrapy import Request

from pytest_crawlmem.attribution.holders import QueuedRequests, container_lengths, find_keepers, python_roots
from pytest_crawlmem.core.assemble import leak_evidence
from pytest_crawlmem.core.models import GrowthSite


def line_of(marker: str) -> str:
    """``test_holders_stored_at.py:N`` of the line ending with ``# marker``."""
    with open(__file__) as source:
        number = next(i for i, text in enumerate(source, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"test_holders_stored_at.py:{number}"


def audit(request: Request) -> None:
    request.meta["audit_started"] = 1.0  # AUDIT


def parse_product(response: Any) -> None:
    rows = response.meta.get("rows", [])
    rows.append(b"r" * 512)  # KEEPS rows


def test_a_list_handed_on_in_meta_is_stored_at_its_append_not_at_another_key_of_the_same_dicts():
    rows: list[bytes] = []
    queued = [Request(f"http://x/{i}", meta={"rows": rows}) for i in range(30)]
    for request in queued:
        audit(request)
    before = container_lengths({"queued requests": QueuedRequests(queued)})
    for i in range(100):
        parse_product(queued[i % 30])
    (holder, _), = find_keepers({"queued requests": QueuedRequests(queued)}, before, 100)
    assert holder.path.startswith("queued requests.meta['rows'] -> list[")
    assert holder.line is not None and holder.line.endswith(line_of("KEEPS rows")), holder.line


class Groups:
    def __init__(self) -> None:
        self.groups: dict[str, dict[str, Any]] = {}

    def add(self, key: str, product: dict[str, Any]) -> None:
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = {"products": [], "opened": key}  # CREATES group
        group["products"].append(product)  # KEEPS products


class Sibling:
    def __init__(self) -> None:
        self.batches: dict[str, dict[str, Any]] = {}

    def add(self, key: str, product: dict[str, Any]) -> None:
        if key not in self.batches:
            self.batches[key] = {"products": [], "opened": key}  # CREATES only
        fill(self.batches[key], product)


def fill(group: dict[str, Any], product: dict[str, Any]) -> None:
    group["products"] += [product]  # not found: the group dict is a parameter here


def grow(owner: Any, responses: int = 100) -> list[Any]:
    for i in range(14):
        owner.add(str(i), {"name": f"p{i}"})
    before = container_lengths({"spider": owner})
    for i in range(responses):
        owner.add(str(i % 14), {"name": f"p{i}", "text": f"{i}" + "d" * 2048})
    return find_keepers({"spider": owner}, before, responses)


def test_groups_filled_through_a_local_are_stored_at_the_append_not_at_the_line_creating_a_group():
    (holder, _), = grow(Groups())
    assert holder.path.startswith("spider.groups[…]['products'] -> 14 lists[")
    assert holder.line is not None and holder.line.endswith(line_of("KEEPS products")), holder.line


def test_a_store_the_search_cannot_see_names_the_container_and_no_sibling_store():
    (holder, _), = grow(Sibling())
    assert holder.path.startswith("spider.batches[…]['products'] -> 14 lists[")
    assert holder.line is None, holder.line


def test_the_storing_line_says_what_the_entries_keep_not_the_lists_own_growth():
    (holder, _), = grow(Groups())
    assert holder.entries_bytes_per_response is not None and holder.entries_bytes_per_response > 2048
    own = GrowthSite(location=holder.line or "", size_diff_bytes=900, count_diff=3, bytes_per_response=9.0)
    reason = leak_evidence([own], (), [holder])
    assert f"top growth {holder.line}: the lists' entries keep 2." in reason, reason
    assert "(9 B/response)" not in reason, reason


class PriceHistory:
    def __init__(self) -> None:
        self.history: defaultdict[str, list[str]] = defaultdict(list)

    def add(self, key: str, product: dict[str, Any]) -> None:
        self.history[key + product["name"]].append(product.get("text", ""))  # KEEPS history


def test_a_defaultdict_filled_on_access_is_stored_at_the_subscript_that_adds_its_keys():
    (holder, _), = grow(PriceHistory())
    assert holder.path.startswith("spider.history -> defaultdict["), holder.path
    assert holder.line is not None and holder.line.endswith(line_of("KEEPS history")), holder.line


class Export:
    def __init__(self) -> None:
        self.rows: queue.Queue[dict[str, Any]] = queue.Queue()

    def add(self, key: str, product: dict[str, Any]) -> None:
        self.rows.put(product)  # KEEPS queue


def test_a_queue_nobody_drains_is_a_holder_stored_at_its_put():
    (holder, evidence), = grow(Export())
    assert holder.path.startswith("spider.rows -> Queue["), holder.path
    assert holder.line is not None and holder.line.endswith(line_of("KEEPS queue")), holder.line
    assert evidence.sampled > 0


def wait_for(rows: queue.Queue[bytes], stop: threading.Event) -> None:
    stop.wait(30)


def test_a_queue_a_live_thread_was_handed_is_a_holder():
    rows: queue.Queue[bytes] = queue.Queue()
    stop = threading.Event()
    writer = threading.Thread(target=wait_for, args=(rows, stop), name="writer", daemon=True)
    writer.start()
    try:
        before = container_lengths(python_roots())
        for _ in range(100):
            rows.put(b"x" * 256)
        holders = [h for h, _ in find_keepers(python_roots(), before, 100)]
        assert any(h.path.startswith("thread writer.arg0 -> Queue[100]") for h in holders), holders
    finally:
        stop.set()
        writer.join()


class Loggers:
    def add(self, key: str, product: dict[str, Any]) -> None:
        logger = logging.getLogger(f"shop.product.{id(self)}.{product['name']}")  # KEEPS logger
        logger.addFilter(lambda record, product=product: bool(product))  # STORES filter


def test_a_logger_per_product_is_held_by_the_logging_registry_and_stored_at_get_logger():
    before = container_lengths(python_roots())
    loggers = Loggers()
    for i in range(100):
        loggers.add("", {"name": f"p{i}", "text": f"{i}" + "d" * 1024})
    holders = [h for h, _ in find_keepers(python_roots(), before, 100)]
    assert holders and holders[0].path.startswith("logging.Logger.manager.loggerDict -> dict["), holders
    assert holders[0].line is not None and holders[0].line.endswith(line_of("KEEPS logger")), holders[0].line


def test_a_logger_made_before_keeps_its_filters_and_they_are_stored_at_add_filter():
    """A second crawl in the same process: the loggers exist already, their filters grow."""
    loggers = Loggers()
    for i in range(100):
        loggers.add("", {"name": f"p{i}"})
    before = container_lengths(python_roots())
    for i in range(100):
        loggers.add("", {"name": f"p{i}", "text": f"{i}" + "d" * 1024})
    holders = [h for h, _ in find_keepers(python_roots(), before, 100)]
    assert holders and holders[0].path.startswith("logging.Logger.manager.loggerDict[…].filters -> "), holders
    assert holders[0].line is not None and holders[0].line.endswith(line_of("STORES filter")), holders[0].line
