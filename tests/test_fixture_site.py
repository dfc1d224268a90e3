"""Tests of the fixture site (``python -m fixture_sites``) and its launcher ``pytest_crawlmem.harness.site``."""

from __future__ import annotations

import gzip
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixture_sites.bodies import html_chunks, rechunk
from pytest_crawlmem.harness.site import RunningSite, SiteStartError, start_site

KIB = 1024
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def site() -> Iterator[RunningSite]:
    """One fixture site (seed 0) for the whole module."""
    with start_site(seed=0) as running:
        yield running


@dataclass
class Fetched:
    """A response read with http.client (bodies de-chunked, never decompressed)."""

    status: int
    headers: dict[str, str]
    body: bytes


def address(site: RunningSite) -> tuple[str, int]:
    """Return the site's (host, port)."""
    parts = urlsplit(site.base_url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def fetch(site: RunningSite, path: str, method: str = "GET", timeout: float = 10.0) -> Fetched:
    """Send one request on a fresh connection and read the whole response."""
    connection = http.client.HTTPConnection(*address(site), timeout=timeout)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        body = response.read()
        return Fetched(response.status, {k.lower(): v for k, v in response.getheaders()}, body)
    finally:
        connection.close()


def raw_exchange(site: RunningSite, request: bytes, timeout: float = 10.0) -> bytes:
    """Send raw request bytes and read until the server closes the connection."""
    with socket.create_connection(address(site), timeout=timeout) as sock:
        sock.sendall(request)
        parts = []
        while chunk := sock.recv(65536):
            parts.append(chunk)
    return b"".join(parts)


def raw_get(path: str) -> bytes:
    """Return a raw HTTP/1.1 GET that asks the server to close afterwards."""
    return f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode()


def product_ids(body: bytes) -> list[int]:
    """Return the product ids linked from a catalog page."""
    return [int(m) for m in re.findall(rb'<a class="product" href="/catalog/product/(\d+)"', body)]


def next_link(body: bytes) -> str | None:
    """Return the href of the next-page link, unescaped."""
    match = re.search(rb'<a class="next" rel="next" href="([^"]+)"', body)
    return match[1].decode().replace("&amp;", "&") if match else None


def test_it_reports_a_loopback_base_url_and_lists_its_routes(site: RunningSite) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", site.base_url)
    index = fetch(site, "/")
    assert index.status == 200
    assert index.headers["content-type"].startswith("text/html")
    for route in (b"/catalog/", b"/large/", b"/oversized/", b"/bomb/", b"/slow/", b"/drip/", b"/explode/"):
        assert route in index.body
    for route in (b"/status/", b"/media/", b"/js/"):
        assert route in index.body


def test_url_joins_paths_and_requires_a_leading_slash(site: RunningSite) -> None:
    assert site.url("/catalog/") == site.base_url + "/catalog/"
    with pytest.raises(ValueError, match="catalog"):
        site.url("catalog/")


def test_catalog_pages_link_every_product_once_and_chain_next_links(site: RunningSite) -> None:
    path: str | None = "/catalog/?pages=3&per_page=5"
    seen: list[int] = []
    pages = 0
    while path is not None:
        page = fetch(site, path)
        assert page.status == 200
        assert len(product_ids(page.body)) == 5
        seen += product_ids(page.body)
        pages += 1
        path = next_link(page.body)
        if pages < 3:
            assert path == f"/catalog/?pages=3&per_page=5&page={pages + 1}"
    assert pages == 3
    assert seen == list(range(1, 16))


def test_catalog_defaults_to_10_pages_of_20_products(site: RunningSite) -> None:
    first = fetch(site, "/catalog/")
    assert product_ids(first.body) == list(range(1, 21))
    assert next_link(first.body) == "/catalog/?pages=10&per_page=20&page=2"
    last = fetch(site, "/catalog/?pages=10&per_page=20&page=10")
    assert product_ids(last.body) == list(range(181, 201))
    assert next_link(last.body) is None


def test_catalog_without_trailing_slash_redirects(site: RunningSite) -> None:
    reply = fetch(site, "/catalog?pages=2")
    assert reply.status == 301
    assert reply.headers["location"] == "/catalog/?pages=2"


def test_product_pages_have_name_price_and_description_and_never_change(site: RunningSite) -> None:
    first = fetch(site, "/catalog/product/7")
    assert first.status == 200
    assert re.search(rb'<h1 class="name">[A-Z][a-z]+ [A-Z][a-z]+ [A-Z][a-z]+</h1>', first.body)
    assert re.search(rb'<span class="price">\d+\.\d\d</span>', first.body)
    description = re.search(rb'<div class="description">([^<]+)</div>', first.body)
    assert description is not None and 200 <= len(description[1]) <= 800
    assert fetch(site, "/catalog/product/7").body == first.body
    assert fetch(site, "/catalog/product/8").body != first.body


def test_a_different_seed_gives_different_product_names(site: RunningSite) -> None:
    with start_site(seed=1) as other:
        assert fetch(other, "/catalog/product/7").body != fetch(site, "/catalog/product/7").body
        assert fetch(other, "/large/3?kb=4").body != fetch(site, "/large/3?kb=4").body


def test_large_pages_are_exactly_k_kib_of_structured_html(site: RunningSite) -> None:
    page = fetch(site, "/large/3?kb=300")
    assert page.status == 200
    assert page.headers["content-length"] == str(300 * KIB)
    assert len(page.body) == 300 * KIB
    assert page.body.startswith(b"<!DOCTYPE html>") and page.body.endswith(b"</body></html>\n")
    assert page.body.count(b'<div class="item"') > 500
    assert page.body.count(b"<a ") > 500
    assert fetch(site, "/large/3?kb=300").body == page.body
    assert len(fetch(site, "/large/3").body) == 256 * KIB


def test_oversized_declared_sends_content_length(site: RunningSite) -> None:
    page = fetch(site, "/oversized/1?kb=3000&mode=declared")
    assert page.headers["content-length"] == str(3000 * KIB)
    assert "transfer-encoding" not in page.headers
    assert len(page.body) == 3000 * KIB


def test_oversized_chunked_streams_several_chunks_without_content_length(site: RunningSite) -> None:
    raw = raw_exchange(site, raw_get("/oversized/1?kb=1000&mode=chunked"))
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert b"Content-Length" not in head
    sizes = []
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        sizes.append(size)
        rest = rest[size + 2 :]
        if size == 0:
            break
    assert sum(sizes) == 1000 * KIB
    assert len(sizes) > 5
    assert len(fetch(site, "/oversized/1").body) == 2048 * KIB


def test_a_gzip_bomb_is_small_on_the_wire_and_inflates_to_exactly_mb_mib(site: RunningSite) -> None:
    bomb = fetch(site, "/bomb/1?mb=8")
    assert bomb.status == 200
    assert bomb.headers["content-encoding"] == "gzip"
    assert bomb.headers["content-type"].startswith("text/html")
    assert int(bomb.headers["content-length"]) == len(bomb.body) < 16 * KIB
    inflated = gzip.decompress(bomb.body)
    assert len(inflated) == 8 * MIB
    assert inflated.startswith(b"<!DOCTYPE html>")
    assert fetch(site, "/bomb/1?mb=8").body == bomb.body


def test_slow_pages_wait_without_blocking_other_requests(site: RunningSite) -> None:
    results: dict[str, float] = {}

    def slow() -> None:
        started = time.monotonic()
        assert fetch(site, "/slow/1?ms=800").status == 200
        results["slow"] = time.monotonic() - started

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.1)
    started = time.monotonic()
    assert fetch(site, "/catalog/product/1").status == 200
    results["fast"] = time.monotonic() - started
    thread.join(5)
    assert results["slow"] >= 0.8
    assert results["fast"] < 0.5


def test_drip_trickles_k_kib_over_ms(site: RunningSite) -> None:
    connection = http.client.HTTPConnection(*address(site), timeout=10)
    try:
        started = time.monotonic()
        connection.request("GET", "/drip/1?kb=16&ms=600")
        response = connection.getresponse()
        first_byte = response.read(1)
        first_at = time.monotonic() - started
        body = first_byte + response.read()
        total = time.monotonic() - started
    finally:
        connection.close()
    assert len(body) == 16 * KIB
    assert first_at < 0.4
    assert 0.6 <= total < 3.0


def test_explode_pages_link_to_fanout_new_unique_pages(site: RunningSite) -> None:
    root = fetch(site, "/explode/0?fanout=4")
    children = re.findall(rb'href="/explode/(\d+)\?fanout=4"', root.body)
    assert [int(c) for c in children] == [1, 2, 3, 4]
    grandchildren = {
        int(c) for child in (1, 2) for c in re.findall(rb"/explode/(\d+)\?", fetch(site, f"/explode/{child}?fanout=4").body)
    }
    assert grandchildren == set(range(5, 13))
    assert len(re.findall(rb'class="child"', fetch(site, "/explode/5").body)) == 10


@pytest.mark.parametrize("code", [200, 301, 404, 429, 500, 503, 599])
def test_status_answers_the_requested_code(site: RunningSite, code: int) -> None:
    assert fetch(site, f"/status/{code}").status == code


def test_status_sends_retry_after_when_asked(site: RunningSite) -> None:
    reply = fetch(site, "/status/429?retry_after=7")
    assert reply.status == 429
    assert reply.headers["retry-after"] == "7"
    assert "retry-after" not in fetch(site, "/status/503").headers


def test_status_204_has_no_body(site: RunningSite) -> None:
    raw = raw_exchange(site, raw_get("/status/204"))
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 204")
    assert body == b""


def test_media_is_a_deterministic_jpeg_of_k_kib(site: RunningSite) -> None:
    image = fetch(site, "/media/5.jpg?kb=100")
    assert image.status == 200
    assert image.headers["content-type"] == "image/jpeg"
    assert len(image.body) == 100 * KIB
    assert image.body[:3] == b"\xff\xd8\xff" and image.body[-2:] == b"\xff\xd9"
    assert fetch(site, "/media/5.jpg?kb=100").body == image.body
    assert len(fetch(site, "/media/5.jpg").body) == 32 * KIB


def test_missing_media_is_404(site: RunningSite) -> None:
    assert fetch(site, "/media/missing/5.jpg").status == 404


@pytest.mark.parametrize("mode", ["render", "alloc", "socket", "store"])
def test_js_pages_are_built_by_an_inline_script(site: RunningSite, mode: str) -> None:
    page = fetch(site, f"/js/2?mode={mode}")
    assert page.status == 200
    assert b"<script>" in page.body and b'<div id="app"></div>' in page.body
    assert b'class="product"' not in page.body
    if mode == "socket":
        assert b"EventSource" in page.body and b"/js/stream/2" in page.body
    if mode == "alloc":
        assert b"setInterval" in page.body
    if mode == "store":  # 1 MiB kept in IndexedDB by default, K KiB with kb=K
        assert b"indexedDB.open" in page.body and b"Uint8Array(1024 * 1024)" in page.body
        assert b"Uint8Array(64 * 1024)" in fetch(site, "/js/2?mode=store&kb=64").body
    assert fetch(site, f"/js/2?mode={mode}").body == page.body


def test_js_render_is_the_default_mode(site: RunningSite) -> None:
    assert fetch(site, "/js/2").body == fetch(site, "/js/2?mode=render").body


def test_event_streams_send_ticks_and_release_everything_when_clients_leave(site: RunningSite) -> None:
    process = psutil.Process(site.pid)
    baseline = process.num_fds()
    clients = []
    for stream_id in range(30):
        sock = socket.create_connection(address(site), timeout=5)
        sock.sendall(f"GET /js/stream/{stream_id}?ms=50 HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        clients.append(sock)
    received = b""
    while received.count(b"event: tick") < 3:
        received += clients[0].recv(65536)
    assert b"text/event-stream" in received and b"Transfer-Encoding: chunked" in received
    for sock in clients[1:]:  # every stream is served at once (fd counts race with lingering connections)
        assert b"text/event-stream" in sock.recv(65536)
    for sock in clients:
        sock.close()
    deadline = time.monotonic() + 5
    while process.num_fds() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.num_fds() <= baseline
    assert fetch(site, "/catalog/product/1").status == 200


def test_a_client_that_stops_reading_does_not_make_the_site_buffer_the_body(site: RunningSite) -> None:
    process = psutil.Process(site.pid)
    before = process.memory_info().rss
    with socket.create_connection(address(site), timeout=5) as sock:
        sock.sendall(raw_get("/oversized/9?kb=1048576&mode=chunked"))
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        time.sleep(0.5)
        grown = process.memory_info().rss - before
        assert fetch(site, "/catalog/product/1").status == 200
    assert grown < 32 * MIB


def test_streaming_64_mib_does_not_grow_the_site(site: RunningSite) -> None:
    process = psutil.Process(site.pid)
    before = process.memory_info().rss
    assert len(fetch(site, "/large/2?kb=65536").body) == 64 * MIB
    assert process.memory_info().rss - before < 32 * MIB


@pytest.mark.parametrize(
    ("path", "parameter"),
    [
        ("/large/1?kb=1000000000000", "kb"),
        ("/large/1?kb=65537", "kb"),
        ("/large/1?kb=abc", "kb"),
        ("/large/1?kb=1.5", "kb"),
        ("/large/1?kb=-1", "kb"),
        ("/large/1?kb=", "kb"),
        ("/oversized/1?kb=1000000000000", "kb"),
        ("/oversized/1?kb=1048577", "kb"),
        ("/oversized/1?mode=zip", "mode"),
        ("/bomb/1?mb=4097", "mb"),
        ("/bomb/1?mb=0", "mb"),
        ("/slow/1?ms=600001", "ms"),
        ("/drip/1?kb=99999999", "kb"),
        ("/drip/1?ms=x", "ms"),
        ("/explode/1?fanout=1001", "fanout"),
        ("/catalog/?pages=100000&per_page=1000", "pages*per_page"),
        ("/catalog/?per_page=10001", "per_page"),
        ("/catalog/?pages=3&page=4", "page"),
        ("/status/99", "code"),
        ("/status/600", "code"),
        ("/status/abc", "code"),
        ("/status/100", "code"),
        ("/status/200?retry_after=soon", "retry_after"),
        ("/media/1.jpg?kb=0", "kb"),
        ("/media/1.jpg?kb=65537", "kb"),
        ("/js/1?mode=wasm", "mode"),
        ("/js/stream/1?ms=1", "ms"),
    ],
)
def test_it_refuses_absurd_or_malformed_values_with_400(site: RunningSite, path: str, parameter: str) -> None:
    reply = fetch(site, path)
    assert reply.status == 400
    assert reply.headers["content-type"].startswith("text/plain")
    assert reply.body.decode().startswith(parameter + " must be")


@pytest.mark.parametrize(
    "path",
    [
        "/../../etc/passwd",
        "/media/..%2f..%2fetc/passwd.jpg",
        "/media/../../etc/passwd",
        "/media/1.jpg/../../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/catalog/product/..%2F..%2Fetc%2Fpasswd",
        "/large/1/../../../etc/passwd",
        "/fixture_sites/__init__.py",
        "/nothing-here",
        "/catalog/product/abc",
        "/media/1.png",
    ],
)
def test_paths_outside_the_generated_content_are_404(site: RunningSite, path: str) -> None:
    raw = raw_exchange(site, raw_get(path))
    assert raw.startswith(b"HTTP/1.1 404")
    assert b"root:" not in raw


def test_it_only_accepts_get_and_head(site: RunningSite) -> None:
    reply = fetch(site, "/catalog/", method="POST")
    assert reply.status == 405
    assert reply.headers["allow"] == "GET, HEAD"


def test_head_requests_get_the_headers_without_a_body(site: RunningSite) -> None:
    for path, length in (("/large/1?kb=64", 64 * KIB), ("/media/1.jpg?kb=4", 4 * KIB)):
        reply = fetch(site, path, method="HEAD")
        assert reply.status == 200
        assert reply.headers["content-length"] == str(length)
        assert reply.body == b""


def test_keep_alive_serves_many_requests_on_one_connection(site: RunningSite) -> None:
    connection = http.client.HTTPConnection(*address(site), timeout=10)
    try:
        connection.connect()
        assert connection.sock is not None
        local = connection.sock.getsockname()
        for product_id in range(1, 51):
            connection.request("GET", f"/catalog/product/{product_id}")
            response = connection.getresponse()
            assert response.status == 200 and response.read()
        connection.request("GET", "/large/1?kb=128")
        assert len(connection.getresponse().read()) == 128 * KIB
        assert connection.sock is not None and connection.sock.getsockname() == local
    finally:
        connection.close()


def test_pipelined_requests_are_answered_in_order(site: RunningSite) -> None:
    requests = b"".join(
        f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode() for path in ("/slow/1?ms=100", "/catalog/product/2", "/status/404")
    )
    raw = raw_exchange(site, requests + raw_get("/catalog/product/3"))
    statuses = re.findall(rb"HTTP/1\.1 (\d{3})", raw)
    assert statuses == [b"200", b"200", b"404", b"200"]
    assert raw.index(b"Slow page 1") < raw.index(b'data-id="2"') < raw.index(b'data-id="3"')


def test_it_serves_250_concurrent_connections_without_refusing_any(site: RunningSite) -> None:
    count = 250
    barrier = threading.Barrier(count, timeout=20)
    outcomes: list[str] = []
    lock = threading.Lock()

    def client(index: int) -> None:
        outcome = "ok"
        try:
            with socket.create_connection(address(site), timeout=20) as sock:
                barrier.wait()
                sock.sendall(raw_get(f"/catalog/product/{index}"))
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                if not data.startswith(b"HTTP/1.1 200") or f'data-id="{index}"'.encode() not in data:
                    outcome = "bad response"
        except Exception as error:
            outcome = type(error).__name__
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=client, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(outcomes) == count
    assert [o for o in outcomes if o != "ok"] == []


def test_close_stops_the_process_cleanly_and_is_idempotent() -> None:
    running = start_site(seed=5)
    pid = running.pid
    assert psutil.pid_exists(pid)
    running.close()
    assert running.process.poll() == 0
    running.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_it_exits_cleanly_on_sigint() -> None:
    running = start_site()
    try:
        running.process.send_signal(signal.SIGINT)
        assert running.process.wait(timeout=5) == 0
    finally:
        running.close()


def test_it_starts_from_any_working_directory_with_a_bare_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with start_site(env={"PATH": os.environ.get("PATH", "")}) as running:
        assert fetch(running, "/").status == 200


def test_a_python_that_exits_at_once_is_a_start_error() -> None:
    with pytest.raises(SiteStartError, match="exited with code 1"):
        start_site(python="/bin/false")


def test_a_start_error_shows_the_exit_code_and_stderr() -> None:
    script = "import sys; sys.stderr.write('boom: no port today\\n'); sys.exit(3)"
    with pytest.raises(SiteStartError, match=r"code 3(.|\n)*boom: no port today"):
        start_site(_argv=[sys.executable, "-c", script])


def test_a_missing_python_is_a_start_error() -> None:
    with pytest.raises(SiteStartError, match="cannot run"):
        start_site(python="/nonexistent/python3")


def test_a_site_that_hangs_is_killed_after_the_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(SiteStartError, match=r"within 0\.5 s") as info:
        start_site(timeout_seconds=0.5, _argv=[sys.executable, "-c", "import time; time.sleep(60)"])
    assert time.monotonic() - started < 5
    pid = int(re.search(r"pid (\d+)", str(info.value))[1])  # type: ignore[index]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_an_unexpected_first_line_is_a_start_error() -> None:
    with pytest.raises(SiteStartError, match="hello"):
        start_site(_argv=[sys.executable, "-c", "print('hello'); import time; time.sleep(60)"])


def test_a_missing_site_package_is_a_start_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(SiteStartError, match="fixture_sites is not installed"):
        start_site()


def test_the_site_exits_when_its_launcher_dies() -> None:
    launcher = textwrap.dedent(
        """
        import os
        from pytest_crawlmem.harness.site import start_site
        site = start_site()
        print(site.pid, flush=True)
        os._exit(0)
        """
    )
    output = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=20, check=True)
    pid = int(output.stdout.strip())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "fixture site outlived its launcher"
        time.sleep(0.05)


def test_the_cli_refuses_non_loopback_hosts() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fixture_sites", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=20
    )
    assert result.returncode == 2
    assert "loopback" in result.stderr
    assert result.stdout == ""


@settings(max_examples=60, deadline=None)
@given(total=st.integers(min_value=1024, max_value=300_000), chunk=st.integers(min_value=1, max_value=70_000))
def test_html_bodies_have_exactly_the_requested_size(total: int, chunk: int) -> None:
    body = b"".join(html_chunks(0, 1, "Large page 1", total, chunk))
    assert len(body) == total
    assert body.endswith(b"</body></html>\n")
    pieces = list(rechunk([body], chunk))
    assert b"".join(pieces) == body and all(len(piece) == chunk for piece in pieces[:-1])
