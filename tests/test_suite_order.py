"""The suite runs its longest files first (conftest.py): the names exist, the collection and xdist follow them."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def longest_first_names(config: pytest.Config) -> tuple[str, ...]:
    """The root conftest's ``LONGEST_FIRST`` (``import conftest`` may find examples/conftest.py: same module name)."""
    root = next(p for p in config.pluginmanager.get_plugins() if getattr(p, "__file__", None) == str(ROOT / "conftest.py"))
    return root.LONGEST_FIRST  # type: ignore[no-any-return]


def test_every_file_named_longest_first_exists_once(request: pytest.FixtureRequest):
    LONGEST_FIRST = longest_first_names(request.config)
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [name for name in LONGEST_FIRST if not (ROOT / name).is_file()] == []


def test_the_named_files_come_first_in_their_order(request: pytest.FixtureRequest):
    LONGEST_FIRST = longest_first_names(request.config)
    files = list(dict.fromkeys(item.path.relative_to(ROOT).as_posix() for item in request.session.items))
    named = [f for f in files if f in LONGEST_FIRST]
    assert files[:len(named)] == named == [f for f in LONGEST_FIRST if f in files], files


def test_xdist_keeps_that_order_under_dist_loadfile(request: pytest.FixtureRequest):
    pytest.importorskip("xdist")
    assert request.config.option.loadscopereorder is False
