"""Holder patterns: ``.shop['groups'][…].items`` parsed into steps and resolved on live objects (crawl process).

The one parser of the patterns the holder search (``holders``), the keeping line (``keeping``) and declared holders
(``declared``) share. May import: nothing of the package.
"""

from __future__ import annotations

import queue
import types
from collections import deque
from typing import Any

#: A step into every entry of a container.
ANY = "[…]"


def contents(value: Any) -> Any:
    """What a container's entries are read from: a ``queue.Queue``'s ``.queue``, else the container itself."""
    return value.queue if isinstance(value, queue.Queue) else value


def resolve(root: Any, pattern: str, limit: int = 64) -> list[Any]:
    """Up to ``limit`` containers of ``root`` matching ``pattern`` (newest first where an order exists)."""
    current: list[Any] = [root]
    for step in steps(pattern):
        nxt: list[Any] = []
        for obj in map(contents, current):
            if step == ANY:
                values = list(obj.values()) if isinstance(obj, dict) else list(obj) if isinstance(obj, (list, deque)) else []
                nxt.extend(reversed(values))
            elif step.startswith("["):
                if isinstance(obj, dict):
                    nxt.extend(v for k, v in list(obj.items()) if f"[{k!r}]" == step)
            else:
                found = static_attribute(obj, step[1:])
                if found is not _MISSING:
                    nxt.append(found)
        current = nxt[: limit * 4]
    return current[:limit]


_MISSING = object()


def static_attribute(obj: Any, name: str) -> Any:
    """An attribute as stored (an instance's or a class's own value, not a bound method), else ``getattr``'s."""
    own = getattr(obj, "__dict__", None)
    if isinstance(own, (dict, types.MappingProxyType)) and name in own:
        return own[name]
    for klass in () if isinstance(obj, (type, types.ModuleType)) else type(obj).__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    try:
        return getattr(obj, name, _MISSING)
    except Exception:
        return _MISSING


def steps(pattern: str) -> list[str]:
    """``.shop['groups'][…].items`` -> ``['.shop', "['groups']", '[…]', '.items']``."""
    found: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            if pattern.startswith(ANY, i):
                found.append(ANY)
                i += len(ANY)
                continue
            end = _closing(pattern, i)
            found.append(pattern[i:end + 1])
            i = end + 1
        else:
            j = i + 1
            while j < len(pattern) and pattern[j] not in ".[":
                j += 1
            found.append(pattern[i:j])
            i = j
    return found


def _closing(pattern: str, start: int) -> int:
    """Index of the ``]`` closing the subscript at ``start`` (a key's repr may hold brackets)."""
    quote = pattern[start + 1] if start + 1 < len(pattern) else ""
    if quote in "'\"":
        end = pattern.find(quote + "]", start + 2)
        return end + 1 if end >= 0 else len(pattern) - 1
    end = pattern.find("]", start)
    return end if end >= 0 else len(pattern) - 1
