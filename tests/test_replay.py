"""Replay of recorded crawls: the readers, bad recordings, the replay site's handler, and replayed crawls.

Readers are fed what Scrapy's own cache storages, a HAR export and warcio write; crawls run
in a pytester subprocess against the replay site in its own process.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inner_session import inner_session

from fixture_sites.protocol import Request as SiteRequest
from fixture_sites.replay import recording as site_recording
from fixture_sites.replay.load import Recording, detect_kind, load_recording
from fixture_sites.replay.recording import Exchange, RecordingError, split_copy, url_key
from fixture_sites.replay.site import Knobs, ReplaySite
from fixture_sites.replay.transform import host_pattern, inflate, rewrite_hosts, served
from fixture_sites.replies import Pending, Response, Streamed
from pytest_crawlmem.core import replay
from pytest_crawlmem.core.budgets import Budgets, check_budgets
from pytest_crawlmem.core.models import CrawlResult, Growth, Peaks
from pytest_crawlmem.harness.replay_site import running_replay

HTML = "text/html; charset=utf-8"


# -- recordings written by the real writers ---------------------------------------------------


def scrapy_cache(directory: Path, pages: dict[str, tuple[int, dict[str, Any], bytes]], *, storage: str = "fs",
                 gzip_files: bool = False) -> None:
    """Write ``pages`` with Scrapy's own FilesystemCacheStorage or DbmCacheStorage, as HTTPCACHE_ENABLED does."""
    from scrapy import Request, Spider
    from scrapy.extensions.httpcache import DbmCacheStorage, FilesystemCacheStorage
    from scrapy.http import Response as ScrapyResponse
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(Spider, {"HTTPCACHE_DIR": str(directory), "HTTPCACHE_GZIP": gzip_files})
    crawler._apply_settings()
    spider = Spider.from_crawler(crawler, name="shop")
    cls = FilesystemCacheStorage if storage == "fs" else DbmCacheStorage
    cache = cls(crawler.settings)
    cache.open_spider(spider)
    for url, (status, headers, body) in pages.items():
        request = Request(url)
        cache.store_response(spider, request, ScrapyResponse(url, status=status, headers=headers, body=body))
    cache.close_spider(spider)


def har_file(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"log": {"version": "1.2", "creator": {"name": "test"}, "entries": entries}}))
    return path


def har_entry(url: str, status: int = 200, body: str = "", headers: tuple[tuple[str, str], ...] = (("Content-Type", HTML),),
              method: str = "GET", base64_body: bool = False) -> dict[str, Any]:
    content: dict[str, Any] = {"mimeType": "text/html", "text": body}
    if base64_body:
        content.update(text=base64.b64encode(body.encode()).decode(), encoding="base64")
    return {"request": {"method": method, "url": url, "headers": []},
            "response": {"status": status, "headers": [{"name": k, "value": v} for k, v in headers], "content": content}}


def warc_file(path: Path, pages: dict[str, tuple[int, list[tuple[str, str]], bytes]]) -> Path:
    """Write ``pages`` as gzipped WARC response records (with their request records) using warcio."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as stream:
        writer = WARCWriter(stream, gzip=True)
        for url, (status, headers, body) in pages.items():
            http_headers = StatusAndHeaders(f"{status} OK", headers, protocol="HTTP/1.1")
            response = writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http_headers)
            request = writer.create_warc_record(
                url, "request", payload=io.BytesIO(b""),
                http_headers=StatusAndHeaders("GET / HTTP/1.1", [("Host", "x")], protocol="HTTP/1.1", is_http_request=True),
            )
            request.rec_headers.add_header("WARC-Concurrent-To", response.rec_headers.get_header("WARC-Record-ID"))
            writer.write_record(response)
            writer.write_record(request)
    return path


PAGES = {
    "https://www.shop.example/": (200, {"Content-Type": HTML, "Set-Cookie": ["sid=1; Path=/", "cur=EUR"]}, b"<html>home</html>"),
    "https://www.shop.example/p/1?b=2&a=1": (200, {"Content-Type": HTML}, b"<html>one</html>"),
    "https://www.shop.example/old": (301, {"Location": "https://www.shop.example/p/1?a=1&b=2"}, b""),
}


@pytest.mark.parametrize("storage,gzip_files", [("fs", False), ("fs", True), ("dbm", False)])
def test_a_scrapy_http_cache_is_read_as_scrapy_wrote_it(tmp_path, storage, gzip_files):
    scrapy_cache(tmp_path, PAGES, storage=storage, gzip_files=gzip_files)
    recording = load_recording(tmp_path)
    assert recording.kind == ("httpcache" if storage == "fs" else "dbm")
    assert len(recording.exchanges) == 3
    home = recording.find("GET", "https://www.shop.example/")
    assert home is not None and home.body == b"<html>home</html>" and home.status == 200
    assert [v for k, v in home.headers if k.lower() == "set-cookie"] == ["sid=1; Path=/", "cur=EUR"]
    moved = recording.find("GET", "https://www.shop.example/old")
    assert moved is not None and moved.status == 301 and moved.header("location") == "https://www.shop.example/p/1?a=1&b=2"
    assert recording.find("GET", "https://www.shop.example/p/1?a=1&b=2") is not None  # query order as the fingerprint sees it
    assert recording.hosts == ["www.shop.example"]


def test_a_gzip_body_in_a_plain_cache_stays_gzip(tmp_path):
    body = gzip.compress(b"<html>" + b"x" * 2000 + b"</html>")
    scrapy_cache(tmp_path, {"https://a.example/": (200, {"Content-Type": HTML, "Content-Encoding": "gzip"}, body)})
    exchange = load_recording(tmp_path).find("GET", "https://a.example/")
    assert exchange is not None and exchange.body == body  # served as recorded: Scrapy decompresses it


def test_a_har_export_is_read_with_base64_bodies_and_aborted_entries_skipped(tmp_path):
    path = har_file(tmp_path / "shop.har", [
        har_entry("https://www.shop.example/", body="<html>home</html>",
                  headers=(("Content-Type", HTML), ("Content-Encoding", "br"), (":status", "200"))),
        har_entry("https://www.shop.example/logo.png", body="PNGDATA", base64_body=True),
        har_entry("https://www.shop.example/aborted", status=0),
        har_entry("https://www.shop.example/form", method="POST", body="thanks"),
    ])
    recording = load_recording(path)
    assert recording.kind == "har" and len(recording.exchanges) == 3
    home = recording.find("GET", "https://www.shop.example/")
    assert home is not None and home.header("content-encoding") is None  # HAR text is decoded
    assert home.header(":status") is None
    logo = recording.find("GET", "https://www.shop.example/logo.png")
    assert logo is not None and logo.body == b"PNGDATA"
    assert recording.find("POST", "https://www.shop.example/form") is not None
    assert recording.find("GET", "https://www.shop.example/form") is None


def test_a_warc_file_is_read_with_warcio_bodies_decoded(tmp_path):
    body = b"<html>" + b"y" * 3000 + b"</html>"
    path = warc_file(tmp_path / "shop.warc.gz", {
        "https://www.shop.example/": (200, [("Content-Type", HTML), ("Content-Encoding", "gzip")], gzip.compress(body)),
        "http://www.shop.example/": (301, [("Location", "https://www.shop.example/")], b""),
    })
    recording = load_recording(path)
    assert recording.kind == "warc" and len(recording.exchanges) == 2
    home = recording.find("GET", "https://www.shop.example/")
    assert home is not None and home.body == body and home.header("content-encoding") is None
    assert recording.find("GET", "http://www.shop.example/").status == 301  # type: ignore[union-attr]


# -- bad recordings: the message names the file and the first bad entry ---------------------------


def test_a_corrupt_cache_entry_is_named(tmp_path):
    scrapy_cache(tmp_path, PAGES)
    first = sorted(tmp_path.glob("shop/*/*/meta"))[0]
    first.write_text("{'url': 'https://www.shop.example/', 'status': ")
    with pytest.raises(RecordingError, match=rf"^{first}: not the dict Scrapy writes \(SyntaxError"):
        load_recording(tmp_path)


def test_a_cache_entry_without_its_body_is_named(tmp_path):
    scrapy_cache(tmp_path, PAGES)
    body = sorted(tmp_path.glob("shop/*/*/response_body"))[1]
    body.unlink()
    with pytest.raises(RecordingError, match=rf"^{body.parent}: incomplete cache entry for https://.*: response_body is missing"):
        load_recording(tmp_path)


def test_a_dbm_cache_with_a_foreign_pickle_is_refused(tmp_path):
    import dbm
    import pickle

    scrapy_cache(tmp_path, PAGES, storage="dbm")
    with dbm.open(str(tmp_path / "shop.db"), "w") as db:
        db[b"0000_data"] = pickle.dumps(Path("/etc"))
    with pytest.raises(RecordingError, match=r"shop.db: key 0000_data: not a pickled response .*refusing to build pathlib"):
        load_recording(tmp_path)


@pytest.mark.parametrize("text,message", [
    ("{not json", r"shop.har: not a HAR file: invalid JSON"),
    ('{"log": {}}', r"shop.har: not a HAR file: no log.entries list"),
    ('{"log": {"entries": [{"request": {"method": "GET", "url": "https://a.example/"}, "response": {"status": 200}},'
     ' {"request": {"method": "GET", "url": "/relative"}, "response": {"status": 200}}]}}',
     r"shop.har: entries\[1\]: URL '/relative' is not an absolute http\(s\) URL"),
    ('{"log": {"entries": [{"request": {"method": "GET", "url": "https://a.example/"}, "response": {"status": "ok"}}]}}',
     r"shop.har: entries\[0\]: status 'ok' of https://a.example/ is not an HTTP status"),
    ('{"log": {"entries": [{"request": {"method": "GET", "url": "https://a.example/"},'
     ' "response": {"status": 200, "content": {"text": "%%%", "encoding": "base64"}}}]}}',
     r"shop.har: entries\[0\].response.content.text: invalid base64"),
    ('{"log": {"entries": []}}', r"shop.har: the har recording holds no response to replay"),
])
def test_a_bad_har_file_is_named_with_its_first_bad_entry(tmp_path, text, message):
    (tmp_path / "shop.har").write_text(text)
    with pytest.raises(RecordingError, match=message):
        load_recording(tmp_path / "shop.har")


def test_a_truncated_warc_file_is_named(tmp_path):
    noise = random.Random(0).randbytes(5000)  # incompressible: the cut lands inside a response record
    path = warc_file(tmp_path / "shop.warc.gz", {f"https://a.example/{i}": (200, [("Content-Type", HTML)], noise)
                                                 for i in range(3)})
    path.write_bytes(path.read_bytes()[:-6000])
    with pytest.raises(RecordingError, match=r"shop.warc.gz: not a readable WARC file at record \d"):
        load_recording(path)


def test_paths_that_are_no_recording_are_named(tmp_path):
    with pytest.raises(RecordingError, match=r"missing: no such file or directory"):
        detect_kind(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordingError, match=r"empty: a directory, but neither a Scrapy HTTP cache"):
        detect_kind(tmp_path / "empty")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(RecordingError, match=r"notes.txt: not a recording this plugin reads"):
        detect_kind(tmp_path / "notes.txt")


def test_the_launcher_reports_the_replay_sites_reason_for_a_bad_recording(tmp_path):
    path = har_file(tmp_path / "bad.har", [har_entry("ftp://files.example/a")])
    with pytest.raises(replay.ReplayError, match=r"bad.har: entries\[0\]: URL 'ftp://files.example/a' is not an absolute"), \
            running_replay(path):
        pass
    with pytest.raises(replay.ReplayError, match=r"replay recording .*nowhere: no such file or directory"), \
            running_replay(tmp_path / "nowhere"):
        pass


# -- URL keys, copies, transforms -------------------------------------------------------------------


def test_url_keys_ignore_what_the_fingerprint_ignores():
    assert url_key("HTTPS://WWW.Shop.Example:443/p?b=2&a=1#top") == "https://www.shop.example/p?a=1&b=2"
    assert url_key("http://shop.example") == "http://shop.example/"
    assert url_key("http://shop.example:8080/") == "http://shop.example:8080/"
    assert url_key("ftp://shop.example/") is None and url_key("/relative") is None


def test_both_processes_spell_the_copy_prefix_alike():
    assert replay.COPY_PREFIX == site_recording.COPY_PREFIX


@given(st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,10}){1,3}", fullmatch=True), st.integers(1, 10_000))
def test_a_copy_url_maps_back_to_its_original(host, copy):
    url = replay.copy_url(f"https://{host}/p/1?x=1", copy)
    assert split_copy(url.split("/")[2]) == (copy, host)
    assert replay.copy_url(f"https://{host}/", 0) == f"https://{host}/"


def test_copies_rewrite_links_to_recorded_hosts_only():
    pattern = host_pattern(["www.shop.example", "cdn.shop.example:8443"])
    body = (b'<a href="https://www.shop.example/p/1">a</a><a href="//cdn.shop.example:8443/i.png">b</a>'
            b'<a href="https://www.shop.example.evil.com/">c</a><a href="https://other.example/">d</a>'
            b'{"u": "https:\\/\\/www.shop.example\\/p\\/2"}')
    out = rewrite_hosts(body, pattern, 7)
    assert b"https://crawlmem-copy7.www.shop.example/p/1" in out
    assert b"//crawlmem-copy7.cdn.shop.example:8443/i.png" in out
    assert b"https://www.shop.example.evil.com/" in out and b"https://other.example/" in out
    assert b"https:\\/\\/crawlmem-copy7.www.shop.example\\/p\\/2" in out
    assert rewrite_hosts(body, pattern, 0) == body


def test_inflated_bodies_keep_their_syntax():
    html = b"<html><body>hi</body></html>"
    padded = inflate(html, 4, HTML)
    assert len(padded) == 4 * len(html) and padded.startswith(html) and padded.endswith(b"-->")
    assert inflate(b'{"a": 1}', 3, "application/json") == b'{"a": 1}' + b" " * 16
    assert inflate(b"\x89PNG", 2, "image/png") == b"\x89PNG\0\0\0\0"


def test_a_copy_of_a_gzip_page_is_rewritten_and_gzipped_again():
    original = b'<html><a href="https://www.shop.example/p/2">next</a></html>'
    exchange = Exchange("GET", "https://www.shop.example/", 200,
                        (("Content-Type", HTML), ("Content-Encoding", "gzip"), ("Content-Length", "99"),
                         ("Location", "https://www.shop.example/x")), gzip.compress(original), "test")
    content_type, headers, body = served(exchange, copy=3, factor=1.0, pattern=host_pattern(["www.shop.example"]))
    assert content_type == HTML
    assert gzip.decompress(body) == original.replace(b"//www.", b"//crawlmem-copy3.www.")
    assert ("Location", "https://crawlmem-copy3.www.shop.example/x") in headers
    assert all(k.lower() not in ("content-length", "content-type") for k, _ in headers)


PLAIN = Knobs()


def site_for(*exchanges: Exchange, knobs: Knobs = PLAIN) -> ReplaySite:
    recording = Recording("mem", "har")
    for exchange in exchanges:
        recording.add(exchange)
    return ReplaySite(recording, knobs)


def get(site: ReplaySite, target: str, method: str = "GET") -> Any:
    return site(SiteRequest(method, target, "HTTP/1.1", True))


def test_the_replay_site_answers_hits_misses_copies_and_head():
    home = Exchange("GET", "https://www.shop.example/", 200, (("Content-Type", HTML), ("X-Recorded", "1")),
                    b'<a href="https://www.shop.example/p">p</a>', "test")
    site = site_for(home)
    hit = get(site, "/https://www.shop.example/")
    assert isinstance(hit, Response) and hit.status == 200 and hit.content_type == HTML
    assert ("X-Recorded", "1") in hit.headers and ("X-Crawlmem-Replay", "hit") in hit.headers
    copy = get(site, "/https://crawlmem-copy2.www.shop.example/")
    assert copy.body == b'<a href="https://crawlmem-copy2.www.shop.example/p">p</a>'
    assert get(site, "/https://www.shop.example/", "HEAD").status == 200
    miss = get(site, "/https://www.shop.example/nope")
    assert miss.status == 404 and ("X-Crawlmem-Replay", "miss") in miss.headers
    assert b"not recorded: GET https://www.shop.example/nope" in miss.body
    assert get(site, "/relative").status == 400
    summary = json.loads(get(site, "/__crawlmem__/summary").body)
    assert (summary["hits"], summary["misses"], summary["entries"]) == (3, 1, 1)


def test_the_replay_site_applies_latency_and_drip():
    page = Exchange("GET", "https://a.example/", 200, (("Content-Type", HTML),), b"x" * 1000, "test")
    assert isinstance(get(site_for(page, knobs=Knobs(latency_seconds=0.5)), "/https://a.example/"), Pending)
    dripped = get(site_for(page, knobs=Knobs(drip_bytes_per_second=2000)), "/https://a.example/")
    assert isinstance(dripped, Streamed) and dripped.content_length == 1000


# -- knobs, budgets ---------------------------------------------------------------------------------


def test_knobs_and_copies_are_checked_with_their_names():
    assert replay.parse_knobs("2", "64 KiB", 3) == replay.ReplayKnobs(2.0, 65536, 3.0)
    with pytest.raises(replay.ReplayError, match="replay_latency"):
        replay.parse_knobs("soon")
    with pytest.raises(replay.ReplayError, match="replay_drip"):
        replay.parse_knobs(None, "fast")
    with pytest.raises(replay.ReplayError, match=r"invalid replay_inflate 0.5: expected a factor from 1 to 1000"):
        replay.parse_knobs(None, None, 0.5)
    with pytest.raises(replay.ReplayError, match=r"invalid replay_copies 0: expected a whole number from 1"):
        replay.check_copies(0)
    with pytest.raises(replay.ReplayError, match=r"invalid replay_copies '3'"):
        replay.check_copies("3")


def test_a_browser_crawl_is_not_replayed_silently_without_its_browser():
    target = replay.ReplayTarget("http://127.0.0.1:1", 1, "shop.har")
    handler = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
    with pytest.raises(replay.ReplayError, match=r"not a browser's; this crawl downloads with https: scrapy_playwright"):
        replay.replay_settings({"DOWNLOAD_HANDLERS": {"https": handler}}, target)
    settings = replay.replay_settings({"DOWNLOAD_HANDLERS": {"file": "x.Y"}}, target)
    assert settings["DOWNLOAD_HANDLERS"] == {"file": "x.Y", "http": replay.HANDLER_PATH, "https": replay.HANDLER_PATH,
                                             "ftp": None, "s3": None}
    assert settings["HTTPCACHE_ENABLED"] is False


def test_start_urls_on_no_recorded_host_are_refused_before_the_crawl():
    target = replay.ReplayTarget("http://127.0.0.1:1", 1, "/r/shop.har",
                                 {"hosts": ["www.shop.example"], "first_url": "https://www.shop.example/"})
    replay.check_start_urls(target, ["https://WWW.shop.example:443/x"])
    with pytest.raises(replay.ReplayError, match=(
        r"replay recording /r/shop.har holds none of the hosts the spider starts on: the first start URL is"
        r" https://books.example/, the recording holds hosts www.shop.example \(its first entry: https://www.shop.example/\)")):
        replay.check_start_urls(target, ["https://books.example/"])
    with pytest.raises(replay.ReplayError, match=r"answered none of the crawl's 4 requests: the first was https://books"):
        replay.check_outcome(target, 0, 4, ["https://books.example/"])
    replay.check_outcome(target, 1, 4, ["https://books.example/"])


def test_the_max_replay_misses_budget_names_the_missed_urls():
    result = CrawlResult("s", (), 0, 0, 0, None, 10, 0, 1.0, "finished", Peaks(), Growth("steady", ""),
                         replay_hits=6, replay_misses=4, replay_missed_urls=tuple(f"https://a.example/{i}" for i in range(4)))
    [violation] = check_budgets(Budgets(max_replay_misses=1), result)
    assert violation.message == (
        "4 requests were not in the replay recording (answered 404), over the budget max_replay_misses=1:"
        " https://a.example/0, https://a.example/1, https://a.example/2 and 1 more"
    )
    assert check_budgets(Budgets(max_replay_misses=4), result) == []


# -- replayed crawls (pytester subprocesses) --------------------------------------------------------

SHOP_SPIDER = '''
import scrapy

KEPT = []


class Shop(scrapy.Spider):
    name = "shop"
    allowed_domains = ["shop.example"]
    start_urls = ["https://www.shop.example/"]
    custom_settings = {"COOKIES_ENABLED": True}

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse_page)

    def parse_page(self, response):
        yield {"url": response.url, "title": response.css("h1::text").get(),
               "cookie": (response.request.headers.get("Cookie") or b"").decode()}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse_page)


class Keep:
    def process_item(self, item):
        KEPT.append(dict(item))
        return item


class LeakyShop(Shop):
    name = "leaky-shop"
    held = []

    def parse_page(self, response):
        self.held.append(bytes(8192))
        yield from super().parse_page(response)
'''


def shop_har(path: Path, products: int = 0, page_kb: int = 1) -> Path:
    """A shop home page linking (absolute, relative, via a redirect, off-site) to product pages."""
    filler = "<p>" + "lorem ipsum " * (page_kb * 85) + "</p>"
    links = "".join(f'<a href="https://www.shop.example/p/{i}">{i}</a>' for i in range(products))
    entries = [
        har_entry("https://www.shop.example/",
                  body=f'<html><a href="/about">about</a><a href="/old">old</a><a href="/gone">gone</a>'
                       f'<a href="https://elsewhere.example/">offsite</a>{links}</html>',
                  headers=(("Content-Type", HTML), ("Set-Cookie", "sid=abc; Path=/; Domain=.shop.example"))),
        har_entry("https://www.shop.example/about", body=f"<html><h1>About</h1>{filler}</html>"),
        har_entry("https://www.shop.example/old", status=301, headers=(("Location", "https://www.shop.example/new"),)),
        har_entry("https://www.shop.example/new", body=f"<html><h1>New</h1>{filler}</html>"),
    ]
    entries += [har_entry(f"https://www.shop.example/p/{i}", body=f"<html><h1>P{i}</h1>{filler}</html>") for i in range(products)]
    return har_file(path, entries)


@pytest.fixture
def shop(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(shop_spider=SHOP_SPIDER)
    shop_har(pytester.path / "shop.har")
    return pytester


def run(pytester: pytest.Pytester, body: str, marker: str = "", *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_replayed=f"""
import pytest
from shop_spider import KEPT, LeakyShop, Shop

{marker}
def test_it(crawl):
{body}
""")
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=900)  # 300 s ran out at load 48


#: Four replayed crawls of the shop recording, one inner session (a session each cost ~1.2 CPU-s of start-up more).
SHOP_SUITE = '''
import pytest
from shop_spider import KEPT, Shop


def test_redirects_cookies_links_and_misses(crawl):
    result = crawl(Shop, replay="shop.har", settings={"ITEM_PIPELINES": {"shop_spider.Keep": 1}})
    assert result.replay_hits == 4 and result.replay_misses == 1
    assert result.replay_missed_urls == ("https://www.shop.example/gone",)
    assert result.status_counts == {200: 3, 301: 1, 404: 1}
    assert sorted((k["url"], k["title"], k["cookie"]) for k in KEPT) == [
        ("https://www.shop.example/about", "About", "sid=abc"),
        ("https://www.shop.example/new", "New", "sid=abc"),
    ]
    assert result.stats.get("offsite/filtered") == 1  # allowed_domains works as against the real host
    assert "X-Crawlmem-Replay" not in str(result.stats)
    from scrapy.downloadermiddlewares import cookies
    assert cookies._split_domain.suffix_list_urls == ()  # the public suffix list is read offline


@pytest.mark.crawl_memory(max_replay_misses=0)
def test_max_replay_misses(crawl):
    crawl(Shop, replay="shop.har")


def test_other_hosts(crawl):
    crawl(Shop, replay="shop.har", start_urls=["https://books.example/"])


def test_corrupt_recording(crawl):
    crawl(Shop, replay="bad.har")
'''


@pytest.fixture
def shop_session(shop: pytest.Pytester) -> pytest.RunResult:
    (shop.path / "bad.har").write_text('{"log": {"entries": [{"request": {"method": "GET"}, "response": {"status": 200}}]}}')
    outcome, _ = inner_session(shop, SHOP_SUITE, "[pytest]\n", "-rA", timeout=900)  # 300 s ran out at load 48
    return outcome


def shop_failure(outcome: pytest.RunResult, test: str) -> list[str]:
    """The lines of ``test``'s failure section in the shop session's output (it failed: asserted)."""
    assert f"FAILED test_suite.py::{test} " in outcome.stdout.str(), outcome.stdout.str()[-3000:]
    block = outcome.stdout.str().split(f"_ {test} _", 1)[1]
    return block.split("\n_____", 1)[0].splitlines()


def test_the_shop_session_ran_each_replayed_crawl(shop_session):
    shop_session.assert_outcomes(passed=1, failed=3)


def test_a_replayed_crawl_follows_redirects_cookies_and_relative_links_and_counts_misses(shop_session):
    assert "PASSED test_suite.py::test_redirects_cookies_links_and_misses" in shop_session.stdout.str()


def test_the_max_replay_misses_budget_fails_a_crawl_naming_the_url(shop_session):
    pytest.LineMatcher(shop_failure(shop_session, "test_max_replay_misses")).fnmatch_lines([
        "*1 requests were not in the replay recording (answered 404), over the budget max_replay_misses=0:"
        " https://www.shop.example/gone*"])


def test_a_recording_of_other_hosts_fails_naming_the_file_and_its_first_entry(shop_session):
    pytest.LineMatcher(shop_failure(shop_session, "test_other_hosts")).fnmatch_lines([
        "*replay recording */shop.har holds none of the hosts the spider starts on: the first start"
        " URL is https://books.example/, the recording holds hosts www.shop.example"
        " (its first entry: https://www.shop.example/)*"])


def test_a_corrupt_recording_fails_the_test_naming_its_first_bad_entry(shop_session):
    pytest.LineMatcher(shop_failure(shop_session, "test_corrupt_recording")).fnmatch_lines([
        "*bad.har: entries[[]0[]]: URL None is not an absolute http(s) URL*"])


def test_copies_run_in_process_and_isolated_alike(shop):
    outcome = run(shop, """
    result = crawl(Shop, replay="shop.har", replay_copies=5, settings={"ITEM_PIPELINES": {"shop_spider.Keep": 1}})
    assert (result.replay_hits, result.replay_misses, result.items_scraped) == (20, 1, 10)  # one URL missed on 5 copies
    titles = sorted(k["title"] for k in KEPT)
    assert titles == ["About"] * 5 + ["New"] * 5
    hosts = {k["url"].split("/")[2] for k in KEPT}
    assert hosts == {"www.shop.example"} | {f"crawlmem-copy{i}.www.shop.example" for i in range(1, 5)}
    assert {k["cookie"] for k in KEPT} == {"sid=abc"}
    isolated = crawl(Shop, replay="shop.har", replay_copies=5, isolate=True)
    assert (isolated.replay_hits, isolated.replay_misses, isolated.items_scraped) == (20, 1, 10)
""")
    outcome.assert_outcomes(passed=1)


def test_the_knobs_slow_and_inflate_replayed_pages(pytester):
    pytester.makepyfile(shop_spider=SHOP_SPIDER)
    shop_har(pytester.path / "shop.har", products=20, page_kb=4)
    outcome = run(pytester, """
    plain = crawl(Shop, replay="shop.har")
    slow = crawl(Shop, replay="shop.har", replay_latency=0.3)
    assert slow.download_latency.p50_seconds >= 0.3  # every reply waited 0.3 s before its head
    dripped = crawl(Shop, replay="shop.har", replay_drip="8 KiB", settings={"CONCURRENT_REQUESTS": 4})
    assert dripped.duration_seconds >= 2.5  # 22 pages of ~4 KiB at 8 KiB/s, 4 at a time: 0.5 s each, 6 rounds
    big = crawl(Shop, replay="shop.har", replay_inflate=8)
    assert 7 * plain.response_sizes.p50_bytes <= big.response_sizes.p50_bytes <= 9 * plain.response_sizes.p50_bytes
    capped = crawl(Shop, replay="shop.har", replay_inflate=8, settings={"DOWNLOAD_MAXSIZE": 16 * 1024})
    assert capped.dropped_count == 22 and capped.items_scraped == 0
    assert plain.items_scraped == big.items_scraped == 22
""")
    outcome.assert_outcomes(passed=1)


def test_copies_agree_with_an_original_recording_on_verdict_and_growth_per_response(pytester):
    pytester.makepyfile(shop_spider=SHOP_SPIDER)
    shop_har(pytester.path / "original.har", products=600)  # 600 responses: a verdict needs 170, a 2 KiB leak is caught
    shop_har(pytester.path / "small.har", products=28)  # 32 pages, 20 copies: 640
    outcome = run(pytester, """
    for spider, verdict in ((Shop, "steady"), (LeakyShop, "retained-objects")):
        original = crawl(spider, replay="original.har")
        copies = crawl(spider, replay="small.har", replay_copies=20)
        LeakyShop.held.clear()
        assert original.responses >= 600 and copies.responses >= 600
        assert original.verdict == copies.verdict == verdict, (original.growth.reason, copies.growth.reason)
        growth = [r.growth.per_response_bytes or 0.0 for r in (original, copies)]
        if verdict == "steady":
            assert abs(growth[0] - growth[1]) <= 2048, growth  # both inside the steady band of +-1 KiB per response
        else:
            assert growth[1] == pytest.approx(growth[0], rel=0.25), growth
""", '@pytest.mark.crawl_memory(leak="warn")')
    outcome.assert_outcomes(passed=1)
