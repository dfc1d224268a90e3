"""Find the Scrapy project a test runs in, as ``scrapy crawl`` does (pytest process; no pytest, no Scrapy).

``scrapy crawl`` reads ``SCRAPY_SETTINGS_MODULE``, else the ``[settings]`` section of the nearest
``scrapy.cfg`` above the working directory (the key named by ``SCRAPY_PROJECT``, ``default`` if
unset). A test is also looked up from its own file, so a suite inside a project uses the
project's settings whatever directory pytest was started from.
"""

from __future__ import annotations

import configparser
import importlib
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path


class ProjectError(ValueError):
    """A Scrapy project that cannot be used: names the file or variable and the value."""


@dataclass(frozen=True)
class Project:
    """A Scrapy project's settings module and where it was found."""

    settings_module: str
    source: str  # "SCRAPY_SETTINGS_MODULE" or the scrapy.cfg path
    root: Path | None = None  # the directory that holds scrapy.cfg (put on sys.path, as Scrapy does)


def find_project(starts: Iterable[Path], environ: Mapping[str, str] | None = None) -> Project | None:
    """The project for a test started from ``starts`` (its directory, then the working directory), or ``None``."""
    env = os.environ if environ is None else environ
    module = env.get("SCRAPY_SETTINGS_MODULE", "").strip()
    if module:
        return Project(module, "SCRAPY_SETTINGS_MODULE")
    for start in starts:
        cfg = nearest_scrapy_cfg(start)
        if cfg is not None:
            return Project(settings_module_of(cfg, env.get("SCRAPY_PROJECT", "default")), str(cfg), cfg.parent)
    return None


def nearest_scrapy_cfg(start: Path) -> Path | None:
    """The first ``scrapy.cfg`` in ``start`` or a directory above it."""
    for directory in (start, *start.parents):
        candidate = directory / "scrapy.cfg"
        if candidate.is_file():
            return candidate
    return None


def settings_module_of(cfg: Path, project: str = "default") -> str:
    """The settings module that ``cfg`` names for ``project``; an error names the file when it names none."""
    parser = configparser.ConfigParser()
    try:
        parser.read(cfg, encoding="utf-8")
    except configparser.Error as exc:
        raise ProjectError(f"cannot read the Scrapy project file {cfg}: {exc}") from None
    module = parser.get("settings", project, fallback="").strip()
    if not module:
        raise ProjectError(f"the Scrapy project file {cfg} has no [settings] {project} = <module> entry")
    return module


def import_settings_module(project: Project) -> None:
    """Import the project's settings module now (putting its root on sys.path), so a bad one fails before any crawl."""
    if project.root is not None and str(project.root) not in sys.path:
        sys.path.append(str(project.root))
    try:
        importlib.import_module(project.settings_module)
    except Exception as exc:
        raise ProjectError(
            f"cannot import the Scrapy project's settings module {project.settings_module!r} (from {project.source}):"
            f" {exc!r}"
        ) from None
