"""Retention paths found with the gc module (no crawl)."""

from __future__ import annotations

import time
from typing import ClassVar

from pytest_crawlmem.attribution.retention import retention_path


class Response:
    pass


class Request:
    def __init__(self, response: Response) -> None:
        self.cb_kwargs = {"listing": response}


class Spider:
    pending: ClassVar[list[Request]] = []


REGISTRY: dict[str, list] = {}


def test_it_names_the_class_attribute_and_every_hop_down_to_the_leaked_object():
    Spider.pending.append(Request(Response()))
    try:
        leaked = Spider.pending[-1].cb_kwargs["listing"]
        path = retention_path(leaked, time_budget_seconds=60)  # 0.8 s of the 1 s default on a machine at load 40
        assert path == (
            f"class {__name__}.Spider .pending -> list[1] [0] -> Request .cb_kwargs -> dict[1] .listing -> Response"
        )
    finally:
        Spider.pending.clear()


def test_it_follows_closures_held_by_a_module_level_registry():
    def make_handler():
        bucket: list[Response] = []

        def on_response(response: Response) -> None:
            bucket.append(response)

        return on_response

    REGISTRY["response_received"] = [make_handler()]
    REGISTRY["response_received"][0](Response())
    leaked = REGISTRY["response_received"][0].__closure__[0].cell_contents[0]
    try:
        path = retention_path(leaked, time_budget_seconds=60)
        assert path is not None
        assert path.startswith(f"module {__name__} .REGISTRY -> dict[1] .response_received")
        assert "on_response .__closure__" in path and "(closure cell)" in path
        assert path.endswith("-> Response")
    finally:
        REGISTRY.clear()


def test_an_object_held_only_by_a_local_variable_has_no_root():
    local = Response()
    assert retention_path(local) is None


def test_the_search_gives_up_when_its_time_is_spent():
    target = Response()
    chain: list = [target]
    for _ in range(100):  # the root is 100 hops up: each hop costs a scan of every gc object (~0.1 s of CPU)
        chain = [chain]
    REGISTRY["deep"] = chain
    try:
        cpu = time.process_time()  # CPU, not wall: a loaded machine stretches the wall clock, not the work done
        assert retention_path(target, max_depth=10_000, max_expansions=10_000, time_budget_seconds=0.2) is None
        assert time.process_time() - cpu < 1.0
        assert retention_path(target, max_depth=10_000, max_expansions=10_000, time_budget_seconds=600) is not None
    finally:
        REGISTRY.clear()
