"""Who keeps a leak: containers of the crawl that grew while it ran, and the line that stores into them.

Runs in the crawl process, at the drained checkpoint that closes the attribution window (the crawl
is alive, nothing is in flight). The roots are the spider, the crawl's components (pipelines,
middlewares, extensions) and the user's modules; a container is a list, dict, set or deque one
attribute (or one dict key) below a root. A container that gained entries in step with the
responses of the window is a holder; the keeping line is found in the root's source (``self.kept.append``,
``KEPT[key] = ...``), not in the allocating stack, which may not reach the user's code at all.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
import types
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..core.models import Holder
from .snapshots import is_user_file

_CONTAINERS = (list, dict, set, deque)
_MUTATORS = frozenset({"append", "extend", "add", "update", "insert", "appendleft", "setdefault", "__setitem__"})
#: A holder gained at least this share of the window's responses in entries (and at least MIN_ENTRIES).
MIN_SHARE = 0.2
MIN_ENTRIES = 10

#: ``{("spider", ".kept"): (id of the container, its length)}``
Lengths = dict[tuple[str, str], tuple[int, int]]


def user_modules() -> dict[str, types.ModuleType]:
    """Modules whose file is the user's code (not the standard library, a package or the plugin)."""
    found = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if isinstance(module, types.ModuleType) and path and is_user_file(path):
            found[name] = module
    return found


def _attributes(obj: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, types.ModuleType):
        yield from ((f".{k}", v) for k, v in list(vars(obj).items()) if not k.startswith("__"))
        return
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict):
        yield from ((f".{k}", v) for k, v in list(attrs.items()))
    for klass in type(obj).__mro__:  # class attributes the instance shares (``kept = []`` on the spider class)
        if klass is object or not is_user_file(getattr(sys.modules.get(klass.__module__), "__file__", "") or ""):
            continue
        yield from ((f".{k}", v) for k, v in list(vars(klass).items()) if not k.startswith("__"))


def container_lengths(roots: Mapping[str, Any]) -> Lengths:
    """Length of every container one attribute below each root, and one dict key below those."""
    lengths: Lengths = {}
    for root_name, root in roots.items():
        for edge, value in _attributes(root):
            if isinstance(value, _CONTAINERS):
                lengths.setdefault((root_name, edge), (id(value), len(value)))
                if isinstance(value, dict) and len(value) <= 64:  # a dict of buffers: {"items": [...]}
                    for key, inner in list(value.items()):
                        if isinstance(inner, _CONTAINERS):
                            lengths.setdefault((root_name, f"{edge}[{key!r}]"[:120]), (id(inner), len(inner)))
    return lengths


def grown(before: Lengths, after: Lengths, responses: int) -> list[tuple[tuple[str, str], int, int]]:
    """Containers (the same object) that gained entries in step with ``responses``: (root and edge, gained, length)."""
    need = max(MIN_ENTRIES, int(MIN_SHARE * responses))
    found = []
    for path, (ident, length) in after.items():
        start = before.get(path)
        if start is not None and start[0] == ident and length - start[1] >= need:
            found.append((path, length - start[1], length))
    found.sort(key=lambda entry: entry[1], reverse=True)
    return found


def _source_of(root: Any) -> list[tuple[str, Any]]:
    """(file, class or module) pairs of the root's own source: the module, or the user classes of its MRO."""
    if isinstance(root, types.ModuleType):
        path = getattr(root, "__file__", None)
        return [(path, root)] if path else []
    found = []
    for klass in type(root).__mro__:
        path = getattr(sys.modules.get(klass.__module__), "__file__", None)
        if path and is_user_file(path):
            found.append((path, klass))
    return found


def _stores_into(node: ast.AST, attr: str, on_self: bool) -> bool:
    """Whether ``node`` stores into ``self.attr`` / ``cls.attr`` / ``Class.attr`` (``on_self``) or the global ``attr``."""
    def names_holder(expr: ast.AST) -> bool:
        while isinstance(expr, ast.Subscript):  # self.buffers["items"].append(...) stores into self.buffers
            expr = expr.value
        if on_self:
            return isinstance(expr, ast.Attribute) and expr.attr == attr
        return isinstance(expr, ast.Name) and expr.id == attr

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
        return names_holder(node.func.value)
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Subscript) and names_holder(t.value) for t in targets)
    return False


def keeping_line(root: Any, edge: str, prefer: Sequence[str] = ()) -> str | None:
    """``spiders/catalog.py:31``: a line of the root's source that stores into the holder at ``edge`` (``.kept``).

    Of several such lines, one that is also in ``prefer`` (the window's growth sites, best first) wins,
    else the first.
    """
    attr = edge.lstrip(".").split("[", 1)[0]
    if not attr.isidentifier():
        return None
    on_self = not isinstance(root, types.ModuleType)
    found: list[str] = []
    for filename, owner in _source_of(root):
        try:
            lines, first = inspect.getsourcelines(owner)
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError):
            continue
        offset = first - 1 if first else 0
        hits = sorted({node.lineno for node in ast.walk(tree) if isinstance(node, (ast.expr, ast.stmt))
                       and _stores_into(node, attr, on_self)})
        found += [f"{_display(filename)}:{line + offset}" for line in hits]
    return next((site for site in prefer if site in found), found[0] if found else None)


def _display(filename: str) -> str:
    relative = os.path.relpath(filename) if os.path.isabs(filename) else filename
    return filename if relative.startswith("..") else relative


def find_holders(
    roots: Mapping[str, Any], before: Lengths, responses: int, *, prefer: Sequence[str] = (), limit: int = 3
) -> tuple[Holder, ...]:
    """The containers of ``roots`` that grew since ``before`` (taken ``responses`` responses ago), with their keeping lines.

    ``prefer``: the growth sites of the window, to pick the keeping line among several.
    """
    if responses <= 0:
        return ()
    holders = []
    for (root_name, edge), gained, length in grown(before, container_lengths(roots), responses)[:limit]:
        root = roots[root_name]
        kind = type(_resolve(root, edge)).__name__
        holders.append(Holder(path=f"{root_name}{edge} -> {kind}[{length:,}]", gained=gained, responses=responses,
                              line=keeping_line(root, edge, prefer)))
    return tuple(holders)


def _resolve(root: Any, edge: str) -> Any:
    """The container at ``edge`` below ``root`` (``None`` if it moved)."""
    attr, _, key = edge.lstrip(".").partition("[")
    value = getattr(root, attr, None)
    if key and isinstance(value, dict):
        value = next((v for k, v in value.items() if f"{k!r}]" == key), None)
    return value
