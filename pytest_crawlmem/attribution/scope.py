"""Which of the user's loaded modules a holder search walks: not a large project's thousands of other spiders (crawl process).

Scrapy's ``SpiderLoader`` imports every module of ``SPIDER_MODULES`` when a crawler process starts: a large project
loads thousands of spider modules that the crawl never runs. A spider module can hold a leak only when the crawl
reaches it: it defines the spider or one of the crawl's components (or a base class of one), or a module in scope
refers to it through its globals (``import``, ``from ... import`` a class or a function; a container imported so is
walked under the importing module's name). A package's submodules, which the import system sets on it, are not its
references: the ``spiders`` package refers to none of its thousands of modules. Every other
user module (items, pipelines, utilities, settings) stays in scope whatever refers to it, as before.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def is_under(name: str, packages: Sequence[str]) -> bool:
    """Whether module ``name`` is one of ``packages`` or inside one (``a.b.c`` is under ``a.b``)."""
    return any(name == package or name.startswith(package + ".") for package in packages)


def spider_packages(settings: Any) -> tuple[str, ...]:
    """The crawl's ``SPIDER_MODULES`` (empty without a project, or when the setting cannot be read)."""
    try:
        return tuple(str(name) for name in settings.getlist("SPIDER_MODULES") or ())
    except Exception:
        return ()


def _modules_of(value: Any) -> Iterable[str]:
    """The modules a global refers to: a module itself, or the module that defines a class or a function."""
    if isinstance(value, types.ModuleType):
        yield value.__name__
    elif isinstance(value, (type, types.FunctionType)):
        name = getattr(value, "__module__", None)
        if isinstance(name, str):
            yield name


def modules_in_scope(
    modules: Mapping[str, types.ModuleType], roots: Iterable[Any], packages: Sequence[str]
) -> dict[str, types.ModuleType]:
    """Of the user's ``modules``, those a holder search walks: every module outside the spider ``packages``, and the
    spider modules that define a root's class (its MRO) or that a module in scope refers to, transitively."""
    if not packages:
        return dict(modules)
    kept = {name: module for name, module in modules.items() if not is_under(name, packages)}
    todo = list(kept)
    for root in roots:
        klass = root if isinstance(root, type) else type(root)
        todo.extend(base.__module__ for base in getattr(klass, "__mro__", ()))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        module = modules.get(name)
        if module is None:
            continue
        kept[name] = module
        for value in list(vars(module).values()):
            if isinstance(value, types.ModuleType) and value.__name__.startswith(name + "."):
                continue  # a package's submodule: the import system set it there, no code of the package refers to it
            todo.extend(other for other in _modules_of(value) if other not in seen and other in modules)
    return {name: kept[name] for name in modules if name in kept}  # in the order they were loaded, as before
