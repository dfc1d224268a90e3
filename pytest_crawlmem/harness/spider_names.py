"""``crawl("spider-name")``: a spider found by its ``name`` in the project's SPIDER_MODULES, as ``scrapy crawl`` does.

Runs in the pytest process.
"""

from __future__ import annotations

import difflib
from typing import Any

#: How many names an unknown spider name is answered with (a large project has thousands).
CLOSEST_NAMES = 5


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
        raise SpiderNameError(
            f"no spider named {spider!r} in the project's SPIDER_MODULES (settings {settings_module}): "
            + known_names_hint(spider, sorted(loader.list()))
        ) from None
    return found


def known_names_hint(spider: str, known: list[str]) -> str:
    """What to say of the project's spiders: all of them when few, else the closest few and how many there are."""
    close = difflib.get_close_matches(spider, known, n=CLOSEST_NAMES, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    if len(known) <= CLOSEST_NAMES:
        return f"{hint}known spiders: {', '.join(known) if known else 'none'}"
    if not close:
        return f"no name of its {len(known):,} spiders is close to it (`scrapy list` names them all)"
    return f"{hint}closest of its {len(known):,} spiders: {', '.join(close)} (`scrapy list` names them all)"


def _spider_loader(settings_module: str) -> Any:
    """The project's spider loader, built from its settings module as ``scrapy list`` builds it."""
    from scrapy.settings import Settings
    from scrapy.utils.misc import load_object

    settings = Settings()
    settings.setmodule(settings_module, priority="project")
    return load_object(settings["SPIDER_LOADER_CLASS"]).from_settings(settings.frozencopy())
