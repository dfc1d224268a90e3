"""``crawl("spider-name")``: a spider found by its ``name`` in the project's SPIDER_MODULES, as ``scrapy crawl`` does.

Runs in the pytest process.
"""

from __future__ import annotations

import difflib
from typing import Any


class SpiderNameError(LookupError):
    """A spider name that no spider of the project has, or a name given outside a Scrapy project."""


def resolve_spider(spider: type | str, settings_module: str | None) -> type:
    """Return ``spider`` itself (a class), or the project's spider called ``spider`` (loaded by SPIDER_LOADER_CLASS)."""
    if not isinstance(spider, str):
        return spider
    if settings_module is None:
        raise SpiderNameError(
            f"crawl({spider!r}) finds spiders by name in a Scrapy project's SPIDER_MODULES, and this test runs in no"
            " project (no scrapy.cfg above the test file or the working directory, no SCRAPY_SETTINGS_MODULE, or"
            " project_settings=False): pass the spider class instead"
        )
    loader = _spider_loader(settings_module)
    try:
        found: type = loader.load(spider)
    except KeyError:
        known = sorted(loader.list())
        close = difflib.get_close_matches(spider, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        listed = ", ".join(known) if known else "none"
        raise SpiderNameError(
            f"no spider named {spider!r} in the project's SPIDER_MODULES (settings {settings_module}): {hint}"
            f"known spiders: {listed}"
        ) from None
    return found


def _spider_loader(settings_module: str) -> Any:
    """The project's spider loader, built from its settings module as ``scrapy list`` builds it."""
    from scrapy.settings import Settings
    from scrapy.utils.misc import load_object

    settings = Settings()
    settings.setmodule(settings_module, priority="project")
    return load_object(settings["SPIDER_LOADER_CLASS"]).from_settings(settings.frozencopy())
