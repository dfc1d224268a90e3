"""Recording an https site from a local stand-in: ``crawlmem record SPIDER -o DIR --stand-in ORIGIN=TARGET``, TARGET a
local server (the fixture site here) or a directory of files, recorded under the original URLs and replayed offline."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_crawlmem.core.standin import StandIn, StandInError, parse_stand_in, read_stand_in_setting, stand_in_url
from pytest_crawlmem.replay.standin import _forms, restore_body

SPIDER = '''
import scrapy


class Shop(scrapy.Spider):
    name = "shop"
    allowed_domains = ["www.shop.example"]
    start_urls = [START]

    def parse(self, response):
        yield {"url": response.url, "title": response.css("h1::text").get()}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)
'''


def test_a_stand_in_is_an_origin_and_a_server_or_a_directory():
    assert parse_stand_in("https://WWW.Shop.Example:443=http://127.0.0.1:8000/") == StandIn(
        "https://www.shop.example", "http://127.0.0.1:8000")
    assert parse_stand_in("https://www.shop.example=site/copy") == StandIn("https://www.shop.example", "site/copy", True)
    for bad in ("https://www.shop.example", "www.shop.example=dir", "https://www.shop.example/p=dir",
                "https://www.shop.example=http://127.0.0.1:8000/base", "https://www.shop.example=ftp://x/"):
        with pytest.raises(StandInError, match=r"invalid --stand-in"):
            parse_stand_in(bad)


def test_a_url_of_a_stood_in_origin_is_fetched_from_its_stand_in_with_path_and_query():
    mapping = read_stand_in_setting(json.dumps({"https://www.shop.example": "http://127.0.0.1:8000"}))
    assert stand_in_url("https://www.shop.example/p/1?b=2&a=1", mapping) == "http://127.0.0.1:8000/p/1?b=2&a=1"
    assert stand_in_url("https://www.shop.example", mapping) == "http://127.0.0.1:8000/"
    assert stand_in_url("http://www.shop.example/", mapping) is None  # another origin: fetched as usual
    assert stand_in_url("https://cdn.shop.example/a.png", mapping) is None


def test_the_stand_ins_own_links_are_written_as_the_origins():
    forms = _forms("http://127.0.0.1:8000", "https://www.shop.example")
    body = b'<a href="http://127.0.0.1:8000/p/1">a</a><img src="//127.0.0.1:8000/i.png">{"u": "http:\\/\\/127.0.0.1:8000\\/x"}'
    expected = (b'<a href="https://www.shop.example/p/1">a</a><img src="//www.shop.example/i.png">'
                b'{"u": "https:\\/\\/www.shop.example\\/x"}')
    assert restore_body(body, b"text/html", b"", forms) == expected
    assert gzip.decompress(restore_body(gzip.compress(body), b"text/html", b"gzip", forms)) == expected
    assert restore_body(b"\x89PNG http://127.0.0.1:8000", b"image/png", b"", forms) == b"\x89PNG http://127.0.0.1:8000"


def project(directory: Path, start: str) -> Path:
    """A Scrapy project in ``directory`` whose spider ``shop`` starts on ``start`` and follows every link."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "scrapy.cfg").write_text("[settings]\ndefault = standin_shop.settings\n")
    package = directory / "standin_shop"
    (package / "spiders").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text('SPIDER_MODULES = ["standin_shop.spiders"]\nROBOTSTXT_OBEY = False\n'
                                         'TELNETCONSOLE_ENABLED = False\n')
    (package / "spiders" / "__init__.py").write_text("")
    (package / "spiders" / "shop.py").write_text(f"START = {start!r}\n" + SPIDER)
    return directory


def record(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_crawlmem", "record", "shop", "-o", "rec", *args], cwd=directory,
                          capture_output=True, text=True, timeout=300, check=False)


def summary(recording: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "fixture_sites.replay", "--recording", str(recording), "--check"],
                          capture_output=True, text=True, timeout=120, check=True)
    data: dict[str, object] = json.loads(done.stdout)
    return data


def test_an_https_site_is_recorded_from_a_directory_under_its_original_urls(tmp_path):
    site = tmp_path / "copy"
    (site / "p").mkdir(parents=True)
    (site / "index.html").write_text('<html><h1>Home</h1><a href="https://www.shop.example/p/1.html">1</a>'
                                     '<a href="p/2.html">2</a><a href="/p/missing.html">gone</a></html>')
    (site / "p" / "1.html").write_text("<html><h1>One</h1></html>")
    (site / "p" / "2.html").write_text('<html><h1>Two</h1><a href="/">home</a></html>')
    project(tmp_path / "proj", "https://www.shop.example/")
    done = record(tmp_path / "proj", "--stand-in", f"https://www.shop.example={site}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith(f"{tmp_path / 'proj' / 'rec'}: 4 responses from www.shop.example;"), done.stdout
    data = summary(tmp_path / "proj" / "rec")
    assert data["hosts"] == ["www.shop.example"] and data["entries"] == 4  # the home page, two pages and a 404


def test_a_bad_stand_in_is_refused_naming_it(tmp_path):
    project(tmp_path, "https://www.shop.example/")
    done = record(tmp_path, "--stand-in", f"https://www.shop.example={tmp_path / 'nowhere'}")
    assert done.returncode == 2
    assert done.stderr.strip().endswith(f"--stand-in https://www.shop.example={tmp_path / 'nowhere'}: no such directory")
    assert not (tmp_path / "rec").exists()


def test_an_https_site_recorded_from_a_local_server_replays_every_page(pytester, fixture_site):
    project(pytester.path, "https://www.shop.example/catalog/?pages=2&per_page=5")
    done = record(pytester.path, "--stand-in", f"https://www.shop.example={fixture_site.base_url}")
    assert done.returncode == 0, done.stderr[-3000:]
    data = summary(pytester.path / "rec")
    assert data["hosts"] == ["www.shop.example"] and data["entries"] == 12  # 2 catalog pages (one twice-linked), 10 products
    pytester.makepyfile(test_replayed='''
from standin_shop.spiders.shop import Shop

def test_it(crawl):
    result = crawl(Shop, replay="rec")
    assert (result.replay_hits, result.replay_misses) == (12, 0)
    assert result.items_scraped == 12
''')
    pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=600).assert_outcomes(passed=1)
