"""Unit tests of size, duration and count parsing (pure)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_crawlmem.core.units import UnitError, format_size, parse_count, parse_seconds, parse_size

UNITS = {"B": 1, "kB": 1000, "MB": 10**6, "GB": 10**9, "TB": 10**12,
         "KiB": 1024, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("25 MB", 25_000_000),
        ("25MiB", 25 * 2**20),
        ("1.5 GiB", 3 * 2**29),
        ("1.1 MB", 1_100_000),
        ("0.1 KiB", 102),
        ("512", 512),
        (" 7 kb ", 7000),
        ("2 mib", 2 * 2**20),
        (4096, 4096),
        (".5 KiB", 512),
    ],
)
def test_it_parses_si_and_iec_sizes_exactly(text, expected):
    assert parse_size(text) == expected


@given(st.integers(0, 10**6), st.sampled_from(sorted(UNITS)), st.integers(0, 999))
def test_any_decimal_size_parses_to_the_exact_rounded_byte_count(whole, unit, thousandths):
    text = f"{whole}.{thousandths:03d} {unit}"
    exact = (Decimal(whole) + Decimal(thousandths) / 1000) * UNITS[unit]
    assert abs(parse_size(text) - exact) <= Decimal("0.5")


@given(st.integers(0, 2**50))
def test_formatted_sizes_parse_back_within_rounding(num_bytes):
    text = format_size(num_bytes)
    assert abs(parse_size(text) - num_bytes) <= max(0.05 * num_bytes, 1)


@pytest.mark.parametrize("bad", ["", "MB", "25 XB", "-3 MB", "1e6", "twelve", "25 M", "1.2.3 MB", True, 1.5, None, [1]])
def test_it_refuses_garbage_sizes_naming_the_value_and_source(bad):
    with pytest.raises(UnitError) as info:
        parse_size(bad, source="peak_rss in crawl_memory marker of test_x")
    assert repr(bad) in str(info.value)
    assert "test_x" in str(info.value)


@given(st.one_of(st.text(max_size=20), st.floats(), st.binary(max_size=8), st.none(), st.booleans()))
def test_garbage_never_raises_anything_but_unit_error(value):
    try:
        result = parse_size(value)
    except UnitError:
        return
    assert isinstance(result, int) and result >= 0


def test_it_refuses_absurd_sizes():
    with pytest.raises(UnitError, match="larger than 1 EiB"):
        parse_size("2000000 TiB")


@pytest.mark.parametrize(("text", "expected"), [("30", 30.0), (12, 12.0), ("2 min", 120.0), ("1.5 s", 1.5), (0.25, 0.25)])
def test_it_parses_durations(text, expected):
    assert parse_seconds(text) == expected


@pytest.mark.parametrize("bad", [0, -1, "0", "soon", float("nan"), float("inf"), True])
def test_it_refuses_bad_durations(bad):
    with pytest.raises(UnitError, match="expected seconds > 0"):
        parse_seconds(bad, source="ini crawlmem_timeout")


@pytest.mark.parametrize("bad", [-1, "3.5", "x", True, 2.0])
def test_it_refuses_bad_counts(bad):
    with pytest.raises(UnitError, match="whole number"):
        parse_count(bad)


def test_sizes_are_formatted_in_iec_units():
    assert format_size(512) == "512 B"
    assert format_size(1536) == "1.5 KiB"
    assert format_size(-3 * 2**20) == "-3.0 MiB"
    assert format_size(5 * 2**40) == "5.0 TiB"
