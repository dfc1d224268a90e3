"""Recording the shop with ``crawlmem record`` (through record_origin.py) writes a cache that replays (any process)."""

from __future__ import annotations

import json

from record_origin import record

from pytest_crawlmem.record import describe, record_command, summarize


def test_crawlmem_record_writes_a_replayable_cache_and_says_its_size_per_page(tmp_path, capsys):
    output = tmp_path / "recording"
    assert record(8, output) == 0  # home, robots.txt, the redirect, 4 categories (+ the sale listing), 8 products
    summary = summarize(output)
    assert summary["kind"] == "httpcache" and summary["hosts"] == ["www.acme-shop.example"]
    assert summary["entries"] == 16
    line = describe(output, summary)
    assert line.startswith(f"{output}: 16 responses from www.acme-shop.example; ") and " per page; bodies " in line
    assert json.loads(json.dumps(summary)) == summary


def test_crawlmem_record_refuses_to_mix_into_an_existing_recording(tmp_path, capsys):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "shop").mkdir()
    assert record_command("shop", tmp_path / "old", pages=None, gzip=False, settings=[]) == 2
    assert "exists and is not an empty directory: record into a new one" in capsys.readouterr().err
