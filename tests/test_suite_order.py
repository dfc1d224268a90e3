"""The suite runs its longest files first (conftest.py): the names exist, the collection and xdist follow them."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_file_named_longest_first_exists_once():
    from conftest import LONGEST_FIRST

    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
    assert [name for name in LONGEST_FIRST if not (ROOT / name).is_file()] == []


def test_the_named_files_come_first_in_their_order(request: pytest.FixtureRequest):
    from conftest import LONGEST_FIRST

    files = list(dict.fromkeys(item.path.relative_to(ROOT).as_posix() for item in request.session.items))
    named = [f for f in files if f in LONGEST_FIRST]
    assert files[:len(named)] == named == [f for f in LONGEST_FIRST if f in files], files


def test_xdist_keeps_that_order_under_dist_loadfile(request: pytest.FixtureRequest):
    pytest.importorskip("xdist")
    assert request.config.option.loadscopereorder is False
