"""Record the books-css spider's crawl of a local copy of https://books.example (its own process, no internet).

``python record_local.py --output recordings/books`` starts the fixture site (``python -m
fixture_sites``) as the local copy, serves it under the real site's URLs the way the replay
download handler asks for them (``GET /https://books.example/catalog/`` -> the copy's
``/catalog/``), and runs ``crawlmem record books-css`` in this project pointed at it. A team with
its real site reachable records with ``crawlmem record books-css -o recordings/books`` alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
SITE = "https://books.example"
HANDLER = "pytest_crawlmem.replay_scrapy.ReplayDownloadHandler"


def copy_server(copy_url: str) -> ThreadingHTTPServer:
    """A server answering ``GET /https://books.example/PATH`` with the local copy's ``PATH`` (status, headers, body)."""

    class Forward(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            target = self.path[1:]
            if not target.startswith(SITE + "/"):
                self.send_error(404, f"not on {SITE}")
                return
            try:
                with urllib.request.urlopen(copy_url + target[len(SITE):], timeout=30) as reply:
                    status, headers, body = reply.status, reply.headers, reply.read()
            except urllib.error.HTTPError as error:
                status, headers, body = error.code, error.headers, error.read()
            self.send_response(status)
            for name in ("Content-Type", "Location"):
                if headers.get(name):
                    self.send_header(name, headers[name])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def record(output: Path, python: str = sys.executable) -> int:
    """Record the crawl into ``output`` (a new directory); return ``crawlmem record``'s exit status."""
    site = subprocess.Popen([python, "-u", "-m", "fixture_sites"], stdout=subprocess.PIPE, text=True)
    try:
        assert site.stdout is not None
        copy_url = site.stdout.readline().strip().rpartition(" ")[2]
        if not copy_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the fixture site did not start: {copy_url!r}")
        server = copy_server(copy_url)
        handlers = json.dumps({"http": HANDLER, "https": HANDLER})
        argv = [python, "-m", "pytest_crawlmem", "record", "books-css", "-o", str(output.resolve()), "--gzip",
                "-s", f"DOWNLOAD_HANDLERS={handlers}", "-s", f"CRAWLMEM_REPLAY_URL=http://127.0.0.1:{server.server_port}",
                "-s", "LOG_LEVEL=WARNING"]
        try:
            return subprocess.run(argv, cwd=HERE, check=False).returncode
        finally:
            server.shutdown()
    finally:
        site.terminate()
        site.wait(timeout=10)


def main() -> int:
    """Parse arguments and record."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--output", type=Path, required=True)
    return record(parser.parse_args().output)


if __name__ == "__main__":
    sys.exit(main())
