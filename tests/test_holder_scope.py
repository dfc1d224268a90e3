"""The holder search walks the modules a crawl can reach, not a large project's every spider module, and reads only the
source files its traced window names (no crawl: module objects built here, a tracemalloc snapshot built by hand)."""

from __future__ import annotations

import sys
import tracemalloc
import types

from pytest_crawlmem.attribution.scope import is_under, modules_in_scope
from pytest_crawlmem.probes.snapshots import traced_files


def _module(name: str, **values: object) -> types.ModuleType:
    module = types.ModuleType(name)
    vars(module).update(values)
    return module


def _project(spiders: int) -> dict[str, types.ModuleType]:
    """``shop`` (a package), ``shop.items`` (a registry), ``shop.spiders`` with ``spiders`` modules, one of which the
    crawled spider imports a helper from; the package holds each submodule as the import system leaves it."""
    items = _module("shop.items", REGISTRY=[])
    helpers = _module("shop.spiders.helpers")
    modules = {"shop": _module("shop"), "shop.items": items, "shop.spiders": _module("shop.spiders"),
               "shop.spiders.helpers": helpers}
    for i in range(spiders):
        modules[f"shop.spiders.site_{i}"] = _module(f"shop.spiders.site_{i}")

    def clean(value: str) -> str:
        return value.strip()

    clean.__module__ = "shop.spiders.helpers"
    helpers.clean = clean  # type: ignore[attr-defined]
    crawled = _module("shop.spiders.crawled", clean=clean, items=items)
    spider = type("CrawledSpider", (), {"__module__": "shop.spiders.crawled"})
    crawled.CrawledSpider = spider  # type: ignore[attr-defined]
    modules["shop.spiders.crawled"] = crawled
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent in modules:
            setattr(modules[parent], child, module)
    return modules


def _spider(modules: dict[str, types.ModuleType]) -> object:
    spider_class: type = modules["shop.spiders.crawled"].CrawledSpider
    return spider_class()


def test_the_spider_packages_other_modules_are_left_out_whatever_their_number() -> None:
    for spiders in (10, 3000):
        modules = _project(spiders)
        scope = modules_in_scope(modules, [_spider(modules)], ["shop.spiders"])
        assert sorted(scope) == ["shop", "shop.items", "shop.spiders.crawled", "shop.spiders.helpers"]


def test_a_spider_module_the_crawl_refers_to_stays_in_scope() -> None:
    modules = _project(5)
    modules["shop.items"].SITE = modules["shop.spiders.site_3"]  # type: ignore[attr-defined]
    scope = modules_in_scope(modules, [_spider(modules)], ["shop.spiders"])
    assert "shop.spiders.site_3" in scope and "shop.spiders.site_2" not in scope


def test_without_spider_modules_every_module_is_in_scope() -> None:
    modules = _project(5)
    assert list(modules_in_scope(modules, [], [])) == list(modules)


def test_a_module_is_under_its_package_only() -> None:
    assert is_under("shop.spiders.site_1", ["shop.spiders"]) and is_under("shop.spiders", ["shop.spiders"])
    assert not is_under("shop.spiders_old.site_1", ["shop.spiders"]) and not is_under("shop", ["shop.spiders"])


def test_the_files_a_snapshot_names_are_the_users_files_of_any_of_its_frames() -> None:
    user = "/srv/project/shop/spiders/crawled.py"
    raw = [
        (0, 100, (("/venv/lib/python3.11/site-packages/scrapy/http/request/__init__.py", 3), (user, 9)), 2),
        (0, 200, ((sys.modules["tracemalloc"].__file__, 1),), 1),
        (0, 300, (("/srv/project/shop/items.py", 12),), 1),
    ]
    assert traced_files(tracemalloc.Snapshot(raw, 4)) == {user, "/srv/project/shop/items.py"}
    assert traced_files(None) == set()
