"""JavaScript pages for browser crawls and their server-sent event stream (site process)."""

from __future__ import annotations

import asyncio
import json

from fixture_sites.catalog import make_product
from fixture_sites.replies import BodyWriter

JS_MODES = ("render", "alloc", "socket", "store")
ITEMS_PER_JS_PAGE = 20

_HEAD = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>\n<body>\n'

_RENDER_SCRIPT = """
const products = {data};
const app = document.getElementById("app");
for (const product of products) {{
  const item = document.createElement("div");
  item.className = "product";
  const name = document.createElement("h2");
  name.className = "name";
  name.textContent = product.name;
  const price = document.createElement("span");
  price.className = "price";
  price.textContent = product.price;
  item.append(name, price);
  app.append(item);
}}
document.body.dataset.rendered = "true";
"""

_ALLOC_SCRIPT = """
// Keeps 1 MiB more reachable every 100 ms (about 10 MiB/s) until the page is closed.
window.hoard = [];
const status = document.getElementById("app");
setInterval(() => {
  const block = new Float64Array(131072);
  block.fill(window.hoard.length + Math.random());
  window.hoard.push(block);
  status.textContent = "allocated " + window.hoard.length + " MiB";
}, 100);
document.body.dataset.rendered = "true";
"""

_SOCKET_SCRIPT = """
// Holds a long-lived connection open: the server sends an event every second.
const app = document.getElementById("app");
const source = new EventSource({url});
window.eventCount = 0;
source.addEventListener("tick", (event) => {{
  window.eventCount += 1;
  const line = document.createElement("p");
  line.className = "event";
  line.textContent = event.data;
  app.append(line);
  while (app.children.length > 20) {{ app.firstElementChild.remove(); }}
}});
document.body.dataset.rendered = "true";
"""


_STORE_SCRIPT = """
// Keeps {kb} KiB in the origin's IndexedDB (a browser context's state, kept in memory by an incognito context after
// the page closes), then renders the products.
const request = indexedDB.open("hoard", 1);
request.onupgradeneeded = () => request.result.createObjectStore("pages");
request.onsuccess = () => {{
  const block = new Uint8Array({kb} * 1024);
  for (let i = 0; i < block.length; i += 4096) {{ block[i] = (i / 4096 + {page_id}) % 251; }}
  const transaction = request.result.transaction("pages", "readwrite");
  transaction.objectStore("pages").put(new Blob([block]), location.pathname);
  transaction.oncomplete = () => {{
{render}  }};
}};
"""


def render_js_page(seed: int, page_id: int, mode: str, kb: int = 1024) -> bytes:
    """Render ``/js/<id>``: an empty ``#app`` container filled by an inline script (``store``: after keeping ``kb``
    KiB in IndexedDB)."""
    if mode in ("render", "store"):
        first = page_id * ITEMS_PER_JS_PAGE + 1
        products = [make_product(seed, pid) for pid in range(first, first + ITEMS_PER_JS_PAGE)]
        data = json.dumps([{"id": p.product_id, "name": p.name, "price": p.price} for p in products])
        script = _RENDER_SCRIPT.format(data=data.replace("</", "<\\/"))
        if mode == "store":
            render = "".join(f"    {line}\n" for line in script.strip().splitlines())
            script = _STORE_SCRIPT.format(kb=kb, page_id=page_id, render=render)
    elif mode == "alloc":
        script = _ALLOC_SCRIPT
    else:
        script = _SOCKET_SCRIPT.format(url=json.dumps(f"/js/stream/{page_id}"))
    title = f"JS page {page_id} ({mode})"
    return (
        _HEAD.format(title=title) + f'<h1>{title}</h1>\n<div id="app"></div>\n<script>{script}</script>\n</body></html>\n'
    ).encode()


async def event_stream(writer: BodyWriter, stream_id: int, interval_seconds: float) -> None:
    """Send a ``tick`` event every ``interval_seconds`` until the client disconnects."""
    await writer.write(b"retry: 1000\n\n")
    loop = asyncio.get_running_loop()
    start = loop.time()
    number = 0
    while True:
        payload = json.dumps({"stream": stream_id, "n": number})
        await writer.write(f"id: {number}\nevent: tick\ndata: {payload}\n\n".encode())
        number += 1
        await asyncio.sleep(max(0.0, start + number * interval_seconds - loop.time()))
