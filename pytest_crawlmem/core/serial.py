"""The JSON form of the frozen records, derived from their dataclass fields (any process, pure).

A record is written as one key per field, named as the field, nested records as objects, tuples as lists,
non-finite floats as ``null``; then the properties its class names in ``DERIVED`` (written, never read back).
A field's metadata may say ``{"json": "count"}`` (written as its length, not read back) or ``{"json": "skip"}``.

Reading takes the field types as the schema: unknown keys are ignored, a key of the class's ``ALIASES``
(an older writer's name, ``"a.b"`` for a nested field) is read as that field, a missing or ``null`` field
takes its default (``null`` in a ``float`` is NaN), a missing optional one is ``None``. A class with ``FILL``
reads any record: a required field it lacks is ``FILL``'s value or its type's zero. Anything else that does
not fit its type raises (``TypeError`` / ``ValueError``), which names the field.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

R = TypeVar("R")
J = TypeVar("J", bound="JsonRecord")  # typing.Self is 3.11+; the package supports 3.10

#: Field metadata: write the field as its length (``samples``: report.json keeps their count), or not at all.
COUNT_ONLY: Mapping[str, str] = types.MappingProxyType({"json": "count"})
NOT_WRITTEN: Mapping[str, str] = types.MappingProxyType({"json": "skip"})


def to_json(value: Any) -> Any:
    """``value`` as JSON-ready data: records by field, mappings with string keys, tuples as lists, NaN as None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return record_json(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [to_json(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def record_json(record: Any) -> dict[str, Any]:
    """One dataclass record as a dict: its fields by name, then its class's ``DERIVED`` properties."""
    data: dict[str, Any] = {}
    for spec in dataclasses.fields(record):
        how = spec.metadata.get("json")
        if how == "skip":
            continue
        value = getattr(record, spec.name)
        data[spec.name] = len(value) if how == "count" else to_json(value)
    for name in getattr(type(record), "DERIVED", ()):
        data[name] = to_json(getattr(record, name))
    return data


def from_json(cls: type[R], data: Mapping[str, Any], **given: Any) -> R:
    """Rebuild a record of ``cls`` from :func:`record_json`'s dict (or an older writer's, through ``ALIASES``).

    ``given`` are fields passed as they are (not read from ``data``): report.json's samples, the report dir.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
    data = upgraded(cls, data)
    hints = _hints(typing.cast(Any, cls))
    fill = getattr(cls, "FILL", None)
    values: dict[str, Any] = dict(given)
    for spec in dataclasses.fields(cls):  # type: ignore[arg-type]
        name, kind = spec.name, hints[spec.name]
        if name in given or spec.metadata.get("json") in ("count", "skip"):
            continue
        raw = data.get(name)
        if raw is not None:
            values[name] = decode(kind, raw)
        elif _has_default(spec):
            continue
        elif _optional(kind) is not None:
            values[name] = None
        elif fill is not None:
            values[name] = fill[name] if name in fill else zero(kind)
        elif name in data and kind is float:
            values[name] = math.nan
        elif name in data:
            values[name] = None
    return cls(**values)


def upgraded(cls: type, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """``data`` with the keys of ``cls.ALIASES`` moved to their fields (never over a key already there)."""
    aliases: Mapping[str, str] = getattr(cls, "ALIASES", {})
    if not any(key in data for key in aliases):
        return data
    out: dict[str, Any] = {k: v for k, v in data.items() if k not in aliases}
    for old, new in aliases.items():
        if old not in data:
            continue
        *parents, leaf = new.split(".")
        target = out
        for step in parents:
            inner = target.get(step)
            if not isinstance(inner, Mapping):
                inner = {}
            target[step] = inner = dict(inner)
            target = inner
        target.setdefault(leaf, data[old])
    return out


def decode(kind: Any, raw: Any) -> Any:
    """``raw`` (JSON data) as a value of the type ``kind`` (a field's annotation)."""
    inner = _optional(kind)
    if inner is not None:
        return None if raw is None else decode(inner, raw)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return raw
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        record: Any = kind
        return record.from_json(raw) if hasattr(record, "from_json") else from_json(record, raw)
    if origin is tuple:
        if not isinstance(raw, (list, tuple)):
            raise TypeError(f"expected a list, got {type(raw).__name__}")
        return tuple(decode(args[0], item) for item in raw)
    if origin in (Mapping, dict) or kind in (Mapping, dict):
        if not isinstance(raw, Mapping):
            raise TypeError(f"expected an object, got {type(raw).__name__}")
        key_kind, value_kind = args or (Any, Any)
        return {decode(key_kind, key): decode(value_kind, value) for key, value in raw.items()}
    if kind is float:
        return math.nan if raw is None else float(raw)
    if kind in (int, str, bool):
        return raw if type(raw) is kind else kind(raw)
    if kind is Path:
        return Path(raw)
    return raw


def zero(kind: Any) -> Any:
    """The empty value of a required field's type (``0``, ``""``, ``()``, ``{}``, a record read from ``{}``)."""
    origin = typing.get_origin(kind)
    if dataclasses.is_dataclass(kind):
        return decode(kind, {})
    if origin is tuple:
        return ()
    if origin in (Mapping, dict):
        return {}
    return kind() if kind in (int, float, str, bool) else None


def _has_default(spec: dataclasses.Field[Any]) -> bool:
    return spec.default is not dataclasses.MISSING or spec.default_factory is not dataclasses.MISSING


def _optional(kind: Any) -> Any:
    """``X`` for ``X | None`` (None for any other type)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(args) < len(typing.get_args(kind)):
            return args[0] if len(args) == 1 else Any
    return None


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


class JsonRecord:
    """Gives a dataclass record ``to_json`` / ``from_json`` derived from its fields (see the module docstring)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON-ready dict, one key per field."""
        return record_json(self)

    @classmethod
    def from_json(cls: type[J], data: Mapping[str, Any]) -> J:
        """Rebuild the record from :meth:`to_json`'s dict (unknown keys ignored, an older writer's read)."""
        return from_json(cls, data)
