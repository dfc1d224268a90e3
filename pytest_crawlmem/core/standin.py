"""Stand-ins for recording: an origin a spider crawls (``https://www.shop.example``) served by a local copy of the site
(``http://127.0.0.1:8000``, or a directory of files), recorded under the original URLs (pure, any process).

``crawlmem record SPIDER -o DIR --stand-in https://www.shop.example=http://127.0.0.1:8000`` runs the spider with
:data:`STAND_IN_HANDLER_PATH` as its http(s) download handler; the handler reads the mapping from the
``CRAWLMEM_STAND_IN`` setting (:func:`stand_in_setting`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

STAND_IN_HANDLER_PATH = "pytest_crawlmem.replay_scrapy.StandInDownloadHandler"
_DEFAULT_PORTS = {"http": 80, "https": 443}


class StandInError(ValueError):
    """A ``--stand-in`` that cannot be used; the message names it."""


@dataclass(frozen=True)
class StandIn:
    """One origin and what stands in for it: a local server's base URL, or a directory (``is_directory``)."""

    origin: str  # scheme://host[:port], lower case, no default port, no path
    target: str  # http(s)://host:port of the stand-in, or a directory path
    is_directory: bool = False


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of an absolute http(s) URL (lower case, the default port dropped), else ``None``."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


def parse_stand_in(text: str) -> StandIn:
    """``ORIGIN=TARGET`` as a :class:`StandIn`: TARGET an http(s) URL of a local server, or else a directory path."""
    origin_text, sep, target = text.partition("=")
    origin = origin_of(origin_text)
    if not sep or origin is None or urlsplit(origin_text.strip()).path.strip("/") or not target.strip():
        raise StandInError(f"invalid --stand-in {text!r}: expected ORIGIN=TARGET, such as"
                           " https://www.shop.example=http://127.0.0.1:8000 or https://www.shop.example=path/to/dir")
    target = target.strip()
    served = origin_of(target)
    if served is not None:
        if urlsplit(target).path.strip("/"):
            raise StandInError(f"invalid --stand-in {text!r}: the stand-in server is a base URL without a path")
        return StandIn(origin, served)
    if "://" in target:
        raise StandInError(f"invalid --stand-in {text!r}: the stand-in is an http(s) server or a directory")
    return StandIn(origin, target, is_directory=True)


def stand_in_setting(stand_ins: Iterable[StandIn]) -> str:
    """The ``CRAWLMEM_STAND_IN`` setting: a JSON object of origin -> stand-in server base URL."""
    return json.dumps({s.origin: s.target for s in stand_ins}, sort_keys=True)


def read_stand_in_setting(value: object) -> dict[str, str]:
    """The mapping of ``CRAWLMEM_STAND_IN`` (a JSON object, or a dict), origins normalised; ValueError naming a bad one."""
    data = json.loads(value) if isinstance(value, str) else value
    if not isinstance(data, Mapping):
        raise ValueError(f"invalid stand-in mapping {value!r}: expected a JSON object of origin -> base URL")
    mapping: dict[str, str] = {}
    for origin, target in data.items():
        key, base = origin_of(str(origin)), origin_of(str(target))
        if key is None or base is None:
            raise ValueError(f"invalid stand-in {origin!r} -> {target!r}: both must be http(s) origins")
        mapping[key] = base
    return mapping


def stand_in_url(url: str, mapping: Mapping[str, str]) -> str | None:
    """Where ``url`` is fetched from when its origin has a stand-in (path and query kept), else ``None``."""
    origin = origin_of(url)
    if origin is None or origin not in mapping:
        return None
    parts = urlsplit(url)
    path = parts.path or "/"
    return mapping[origin] + path + (f"?{parts.query}" if parts.query else "")
