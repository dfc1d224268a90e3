"""Record the shop spider's crawl of the stand-in origin into a Scrapy HTTP cache (its own process).

``python record_origin.py --products 40 --output recordings/shop`` starts ``origin.py``, runs
``crawlmem record shop`` (``--spider shop_sitemap``: the sitemap spider) in this project with the
download handler pointed at the origin (a real team records its real site with
``crawlmem record shop -o DIR`` and nothing else), prints the recording's size per page and
stops the origin.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HANDLER = "pytest_crawlmem.replay_scrapy.ReplayDownloadHandler"


def record(products: int, output: Path, *, gzip: bool = False, python: str = sys.executable, spider: str = "shop") -> int:
    """Record ``spider``'s crawl of a shop of ``products`` products into ``output``; return crawlmem record's exit
    status."""
    origin = subprocess.Popen([python, "-u", str(HERE / "origin.py"), "--products", str(products)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert origin.stdout is not None
        url = origin.stdout.readline().strip().rpartition(" ")[2]
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"origin.py did not start: {url!r}")
        handlers = json.dumps({"http": HANDLER, "https": HANDLER})
        argv = [python, "-m", "pytest_crawlmem", "record", spider, "-o", str(output.resolve()),
                "-s", f"DOWNLOAD_HANDLERS={handlers}", "-s", f"CRAWLMEM_REPLAY_URL={url}", "-s", "LOG_LEVEL=WARNING",
                *(["--gzip"] if gzip else [])]
        return subprocess.run(argv, cwd=HERE, check=False).returncode
    finally:
        origin.terminate()
        origin.wait(timeout=10)


def main() -> int:
    """Parse arguments and record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--products", type=int, default=40)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--spider", default="shop", help="the spider to record (shop, shop_sitemap)")
    args = parser.parse_args()
    return record(args.products, args.output, gzip=args.gzip, spider=args.spider)


if __name__ == "__main__":
    sys.exit(main())
