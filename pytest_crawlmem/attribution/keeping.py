"""The line that keeps a leak: the code that stores into a holder, and what the holder gained (crawl process).

A holder (``holders.py``) is a container pattern below a root; the line to change is the one that stores into it, not
the one that allocated what it keeps. That line is found in the user's source: a mutator call on the holder
(``self.groups[key]["items"].append(...)``: the attribute ``groups``, three subscripts deep counting the call's
target), a subscript assignment (``Page.registry[url] = self``), ``heapq.heappush(self.heap, ...)``, a storing method of
a Scrapy component (``self.crawler.stats.set_value(...)``, ``crawler.signals.connect(...)``), or the decorated ``def``
of an ``lru_cache``. Of several candidates, the one in the function that allocated the holder's newest entries wins
(their tracemalloc tracebacks, read while the attribution window still traces), then one that is a growth site.
The same entries say which objects own native memory (their type is implemented in a C extension: lxml elements,
numpy arrays, zlib decompressors, Pillow's image cores).
"""

from __future__ import annotations

import ast
import functools
import gc
import os
import queue
import sys
import sysconfig
import tokenize
import tracemalloc
import types
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_crawlmem.attribution.paths import ANY
from pytest_crawlmem.attribution.paths import steps as _steps
from pytest_crawlmem.probes.snapshots import is_user_file, site_of

_MUTATORS = frozenset({"append", "extend", "add", "update", "insert", "appendleft", "extendleft", "setdefault",
                       "__setitem__", "put", "put_nowait", "push"})
_STORING_CALLS = frozenset({"heappush", "heappushpop", "insort", "insort_left", "insort_right"})
#: A Scrapy component a user stores into through its methods: the end of its class name -> those methods.
COMPONENT_STORES: dict[str, frozenset[str]] = {
    "StatsCollector": frozenset({"set_value", "inc_value", "max_value", "min_value"}),
    "SignalManager": frozenset({"connect"}),
    "dispatcher": frozenset({"connect"}),  # pydispatch's module keeps the receivers
}
#: A subscript of a call on the holder goes one level down (``self.groups.setdefault(k, {})["items"]``).
_DESCENDING = frozenset({"setdefault", "get", "__getitem__"})
#: Calls that keep an object per argument in a registry of the standard library: the call -> the registry's attribute.
_REGISTERING_CALLS = {"getLogger": "loggerDict"}
#: Methods that store their argument into a list of the object they are called on: the method -> that list.
_ADDING_METHODS = {"addFilter": "filters", "addHandler": "handlers"}
_HEAPTYPE = 1 << 9


@dataclass(frozen=True)
class Store:
    """A line of the user's source that stores into something: what (``name``), how deep, in which function."""

    location: str  # spiders/shop.py:31
    name: str  # the attribute or global name stored into, or the component method called
    depth: int  # subscripts between ``name`` and the container stored into
    kind: str  # "attr" (self.x / Class.x), "name" (a global), "method" (a component's storing method)
    function: tuple[int, int]  # the enclosing function's first and last line (0, 0 at module level)
    line: int
    #: the constant key of each subscript below ``name`` (``None``: computed), ``("rows",)`` for ``meta["rows"]``
    keys: tuple[str | None, ...] = ()


@dataclass
class Evidence:
    """What the newest entries of a holder tell: where they were allocated and which C-extension types they are."""

    sites: Counter[str] = field(default_factory=Counter)  # the innermost user frame of each traced entry
    owners: Counter[str] = field(default_factory=Counter)  # "lxml.etree._Element": entries (or what they own directly)
    sampled: int = 0


def _display(filename: str) -> str:
    relative = os.path.relpath(filename) if os.path.isabs(filename) else filename
    return filename if relative.startswith("..") else relative


#: What a local name stands for: (name, depth, kind, keys) of the container it was bound to in its function.
Aliases = dict[str, tuple[str, int, str, tuple[str | None, ...]]]


def _key(node: ast.AST) -> str | None:
    """A subscript's key when it is a constant string (``["rows"]``), else ``None`` (computed: ``[key]``)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _target(expr: ast.AST, aliases: Aliases | None = None) -> tuple[str, int, str, tuple[str | None, ...]] | None:
    """(name, subscripts, kind, keys) of the container an expression denotes: ``self.a["b"][k]`` ->
    ("a", 2, "attr", ("b", None)); a local bound to one (``rows = response.meta.get("rows", [])``) stands for it."""
    keys: list[str | None] = []
    while True:
        if isinstance(expr, ast.Subscript):
            keys.append(_key(expr.slice))
            expr = expr.value
        elif (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
              and expr.func.attr in _DESCENDING):
            keys.append(_key(expr.args[0]) if expr.args else None)
            expr = expr.func.value
        else:
            break
    keys.reverse()
    if isinstance(expr, ast.Attribute):
        return expr.attr, len(keys), "attr", tuple(keys)
    if isinstance(expr, ast.Name):
        if aliases and expr.id in aliases:
            name, depth, kind, base = aliases[expr.id]
            return name, depth + len(keys), kind, base + tuple(keys)
        return expr.id, len(keys), "name", tuple(keys)
    return None


def _aliases(function: ast.AST) -> Aliases:
    """The locals of a function bound to a container below an attribute: ``group = self.groups[key] = {...}``,
    ``rows = response.meta.get("rows", [])`` (a store through the local is a store into that container)."""
    found: Aliases = {}
    for node in ast.walk(function):
        if not isinstance(node, ast.Assign):
            continue
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if not names:
            continue
        places: list[ast.expr] = [t for t in node.targets if isinstance(t, (ast.Subscript, ast.Attribute))]
        target = _target(places[0] if places else node.value, found)
        if target is None or (target[2] == "name" and target[1] == 0) or target[0] in names:
            continue  # ``x = y``, ``rows = []``: no container of an attribute
        for name in names:
            found.setdefault(name, target)
    return found


def _stores_of(node: ast.AST, aliases: Aliases | None = None) -> Iterable[tuple[str, int, str, tuple[str | None, ...]]]:
    """What ``node`` stores into (nothing when it stores nowhere)."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in _MUTATORS and (found := _target(func.value, aliases)) is not None:
                yield found
            if func.attr in _ADDING_METHODS:  # logger.addFilter(f): into the logger's filters
                yield _ADDING_METHODS[func.attr], 0, "attr", ()
            if any(func.attr in methods for methods in COMPONENT_STORES.values()):
                yield func.attr, 0, "method", ()
        called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if called in _STORING_CALLS and node.args and (found := _target(node.args[0], aliases)) is not None:
            yield found
        if called in _REGISTERING_CALLS and node.args and not isinstance(node.args[0], ast.Constant):
            yield _REGISTERING_CALLS[called], 0, "attr", ()  # logging.getLogger(name): a logger kept per name
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Subscript) and (found := _target(target.value, aliases)) is not None:
                yield found
            elif isinstance(node, ast.AugAssign) and (found := _target(target, aliases)) is not None:
                yield found  # self.kept += [item]


def _parse(filename: str) -> ast.Module | None:
    try:
        with tokenize.open(filename) as source:
            return ast.parse(source.read(), filename)
    except (OSError, SyntaxError, ValueError):
        return None


def stores_in(filename: str) -> list[Store]:
    """Every storing line of one source file, with its enclosing function."""
    tree = _parse(filename)
    if tree is None:
        return []
    defs = sorted((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
                  key=lambda n: (n.end_lineno or n.lineno) - n.lineno)
    functions = [(n.lineno, n.end_lineno or n.lineno) for n in defs]
    aliases = [_aliases(n) for n in defs]
    found = []
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        inner = next((i for i, r in enumerate(functions) if r[0] <= lineno <= r[1]), None)
        for name, depth, kind, keys in _stores_of(node, aliases[inner] if inner is not None else None):
            function = functions[inner] if inner is not None else (0, 0)
            found.append(Store(f"{_display(filename)}:{lineno}", name, depth, kind, function, lineno, keys))
    return sorted(set(found), key=lambda s: s.line)


def decorated_def(function: Any) -> str | None:
    """``file:line`` of the ``def`` of a decorated function (an ``lru_cache``'s ``__wrapped__``), in the user's code."""
    code = getattr(function, "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return None
    tree = _parse(code.co_filename)
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            if first == code.co_firstlineno or node.lineno == code.co_firstlineno:
                return f"{_display(code.co_filename)}:{node.lineno}"
    return f"{_display(code.co_filename)}:{code.co_firstlineno}"


def _own_files(root: Any) -> list[str]:
    """The files of the root's own source: the module, or the user classes of its type's MRO (or of the class)."""
    if isinstance(root, types.ModuleType):
        path = getattr(root, "__file__", None)
        return [path] if path and is_user_file(path) else []
    classes = root.__mro__ if isinstance(root, type) else type(root).__mro__
    found = []
    for klass in classes:
        path = getattr(sys.modules.get(klass.__module__), "__file__", None)
        if path and is_user_file(path) and path not in found:
            found.append(path)
    return found


def user_files() -> list[str]:
    """The source files of every module of the user's code that is loaded."""
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(module, types.ModuleType) and path and path.endswith(".py") and is_user_file(path):
            found.append(path)
    return sorted(set(found))


def component_methods(root: Any) -> frozenset[str] | None:
    """The storing methods of a Scrapy component root (the stats collector, the signals), ``None`` for other roots."""
    names = [root.__name__] if isinstance(root, types.ModuleType) else [k.__name__ for k in type(root).__mro__]
    for suffix, methods in COMPONENT_STORES.items():
        if any(name.endswith(suffix) for name in names):
            return methods
    return None


def holder_name(pattern: str) -> tuple[str, int]:
    """The attribute a pattern ends on and the subscripts below it: ``.shop['groups'][…]['items']`` -> ("shop", 3)."""
    name, keys = holder_keys(pattern)
    return name, len(keys)


def holder_keys(pattern: str) -> tuple[str, tuple[str | None, ...]]:
    """The attribute a pattern ends on and the key of each subscript below it (``None``: any key):
    ``.shop['groups'][…]['items']`` -> ("shop", ("groups", None, "items"))."""
    name, keys = "", list[str | None]()
    for step in _steps(pattern):
        if step.startswith("."):
            name, keys = step[1:], []
        elif step == ANY:
            keys.append(None)
        else:
            try:
                key = ast.literal_eval(step[1:-1])
            except (ValueError, SyntaxError):
                key = None
            keys.append(key if isinstance(key, str) else None)
    return name, tuple(keys)


def _fits(store: Store, keys: tuple[str | None, ...], filled_on_access: bool) -> int | None:
    """How a store fits a holder ``keys`` deep (0: stores into it, 1: into an entry a ``defaultdict`` made on access,
    ``None``: into another container, a parent creating an entry or a sibling key)."""
    if store.depth == len(keys):
        exact = 0
    elif filled_on_access and store.depth == len(keys) + 1:
        exact = 1  # self.history[name].append(price): the subscript itself adds the key to the defaultdict
    else:
        return None
    if any(a is not None and b is not None and a != b for a, b in zip(store.keys, keys, strict=False)):
        return None  # request.meta["audit_started"] = ... is no store into meta["rows"]
    return exact


def keeping_line(
    root: Any, pattern: str, target: Any = None, prefer: Sequence[str] = (), evidence: Evidence | None = None,
    files: Sequence[str] | None = None, parsed: dict[str, list[Store]] | None = None,
) -> str | None:
    """``spiders/shop.py:31``: the line of the user's source that stores into the holder at ``pattern`` below ``root``.

    ``target``: one container of the holder (an ``lru_cache`` wrapper names its decorated ``def``). ``prefer``: the
    window's growth sites; ``evidence``: the allocation sites of the holder's newest entries (its candidate in the same
    function wins). ``files``/``parsed``: the user's files and their stores, when the caller reads them once for several
    holders. ``None`` when no line of the user's code stores into it.
    """
    wrapped = getattr(target, "__wrapped__", None)
    if wrapped is not None and hasattr(target, "cache_info"):
        return decorated_def(wrapped)
    methods = component_methods(root)
    own = _own_files(root)
    ordered = own + [f for f in (user_files() if files is None else files) if f not in own]
    name, keys = holder_keys(pattern)
    filled_on_access = getattr(type(target), "__missing__", None) is not None  # a defaultdict, a Counter
    candidates: list[tuple[int, Store]] = []
    parsed = {} if parsed is None else parsed
    for filename in ordered:
        if filename not in parsed:
            parsed[filename] = stores_in(filename)
        for store in parsed[filename]:
            if methods is not None and store.kind == "method" and store.name in methods:
                candidates.append((0, store))  # stats.set_value(...), signals.connect(...)
            elif store.name == name and store.kind != "method" and (
                    store.kind == "attr" or isinstance(root, types.ModuleType)):
                # self.groups[key]["items"].append(...), or into a component's own attribute; a store at another depth
                # or under another key (creating the group dict, meta["audit_started"]) is not one into this holder
                fit = _fits(store, keys, filled_on_access)
                if fit is not None:
                    candidates.append((fit, store))
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c[0], *_rank(c[1], len(keys), prefer, evidence, own)))[1].location


def _rank(store: Store, depth: int, prefer: Sequence[str], evidence: Evidence | None, own: Sequence[str]) -> tuple[Any, ...]:
    """Sort key of a candidate: the holder's depth, then the allocating function, a growth site, the root's own file."""
    allocated_here = 0
    if evidence is not None and store.function != (0, 0):
        path = store.location.rsplit(":", 1)[0]
        for site, count in evidence.sites.items():
            file, _, line = site.rpartition(":")
            if file == path and line.isdigit() and store.function[0] <= int(line) <= store.function[1]:
                allocated_here += count
    in_prefer = next((i for i, site in enumerate(prefer) if site == store.location), len(prefer))
    in_own = any(store.location.rsplit(":", 1)[0] == _display(f) for f in own)
    return (store.depth != depth, -allocated_here, in_prefer, not in_own, store.line)


def same_function(line: str, sites: Iterable[str]) -> list[str]:
    """Of ``sites`` (``file:line``), those in the function that holds ``line`` (what a storing line stores was most
    likely allocated beside it, when the stored objects' tracebacks are not known)."""
    path, _, number = line.rpartition(":")
    candidates = [f for f in user_files() if _display(f) == path]
    tree = _parse(candidates[0]) if candidates else None
    if tree is None or not number.isdigit():
        return []
    at = int(number)
    ranges = sorted(((n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= at <= (n.end_lineno or 0)),
                    key=lambda r: r[1] - r[0])
    if not ranges:
        return []
    first, last = ranges[0]
    found = []
    for site in sites:
        file, _, other = site.rpartition(":")
        if file == path and other.isdigit() and first <= int(other) <= last and site != line:
            found.append(site)
    return found


def is_native_type(kind: type) -> bool:
    """Whether instances of ``kind`` can own memory tracemalloc cannot see: the type (or a base) is implemented in a C
    extension outside the interpreter and its standard library (lxml, Pillow, numpy, a third-party decompressor).

    The standard library's C types allocate through Python's allocators (zlib's and bz2's state included), which
    tracemalloc traces; a C extension's own ``malloc`` it does not.
    """
    return any(_is_c_type(klass) for klass in kind.__mro__)  # lxml.html.HtmlElement is Python over etree.ElementBase


@functools.lru_cache(maxsize=512)
def _is_c_type(kind: type) -> bool:
    module = getattr(kind, "__module__", "builtins") or "builtins"
    if not kind.__flags__ & _HEAPTYPE:  # a static type, written in C: where its type object lives says whose it is
        library = _mapped_file(id(kind))
        if library is not None:
            return _is_extension_file(library)
        return module != "builtins"  # no /proc/self/maps: an extension's types are named after their module
    if module == "builtins":
        return False
    return _is_extension_file(getattr(sys.modules.get(module), "__file__", "") or "")


def _is_extension_file(path: str) -> bool:
    """A C extension's shared object outside the interpreter and its standard library."""
    if not path.endswith((".so", ".pyd")) and ".so." not in os.path.basename(path):
        return False
    real = os.path.realpath(path)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    return not real.startswith(stdlib + os.sep) and "libpython" not in os.path.basename(real)


def _mapped_file(address: int) -> str | None:
    """The file mapped at ``address`` in this process ('' for an anonymous mapping), ``None`` without /proc."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split(maxsplit=5)
                start, _, end = parts[0].partition("-")
                if int(start, 16) <= address < int(end, 16):
                    return parts[5].strip() if len(parts) == 6 else ""
    except (OSError, ValueError, IndexError):
        return None
    return ""


def _newest(container: Any, limit: int) -> list[Any]:
    """The newest entries of a container (keys and values of a dict), an ``lru_cache``'s cached keys and results."""
    if isinstance(container, queue.Queue):
        container = container.queue
    if isinstance(container, dict):
        items = []
        for key, value in reversed(list(container.items())[-limit:]):
            items += [key, value]
        return items
    if isinstance(container, (list, deque)):
        return list(container)[-limit:][::-1]
    if isinstance(container, (set, frozenset)):
        return list(container)[:limit]
    if hasattr(container, "cache_info"):
        caches = [r for r in gc.get_referents(container) if isinstance(r, dict) and r is not getattr(container, "__dict__", None)]
        return [x for cache in caches for x in _newest(cache, limit)]
    return []


def _owned(obj: Any) -> list[Any]:
    """What an entry owns directly: a tuple's or list's items, a dict's values, an object's attributes."""
    if isinstance(obj, (tuple, list)):
        return list(obj)[:16]
    if isinstance(obj, dict):
        return list(obj.values())[:16]
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict) and not isinstance(obj, (type, types.ModuleType)):
        return list(attrs.values())[:16]
    return []


def entry_evidence(containers: Sequence[Any], limit: int = 64) -> Evidence:
    """Where the newest entries of ``containers`` were allocated (needs tracemalloc running) and their C-extension types."""
    evidence = Evidence()
    per = max(1, limit // max(len(containers), 1))
    for container in containers:
        for entry in _newest(container, per):
            evidence.sampled += 1
            for obj in [entry, *_owned(entry)]:
                traceback = tracemalloc.get_object_traceback(obj) if tracemalloc.is_tracing() else None
                site = site_of(traceback) if traceback is not None else None
                if site is not None:
                    evidence.sites[site[0]] += 1
                if is_native_type(type(obj)):
                    # the Python object that owns it: the entry itself (an lxml element), or the entry whose attribute
                    # is the C object (a Pillow image and its ImagingCore), or a record's field (a tuple's array)
                    kind = type(entry if obj is not entry and not isinstance(entry, (tuple, list, dict)) else obj)
                    evidence.owners[f"{kind.__module__}.{kind.__qualname__}"] += 1
                    break  # the entry (or the first part of it) that owns native memory
    return evidence
