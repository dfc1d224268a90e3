"""The crawl target of pytest-crawlmem: a deterministic local web site run as `python -m fixture_sites`.

It runs in its own process, binds loopback only, prints
``fixture-site listening on http://127.0.0.1:PORT`` as its first stdout line and
serves until SIGTERM/SIGINT. Routes (public API) and their query caps are listed in
:mod:`fixture_sites.routes` and on the site's index page ``/``. This package never
imports ``pytest_crawlmem``.
"""

__all__: list[str] = []
