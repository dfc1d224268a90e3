"""Media pipelines under measurement: failed media downloads into the drop ledger, and what the cache keeps alive.

FilesPipeline, ImagesPipeline and every other MediaPipeline download their files outside the
spider (``engine.download_async``), so a failed file download reaches neither a callback nor an
errback of the spider. Each pipeline instance of the crawl gets its ``media_downloaded`` and
``media_failed`` wrapped (the instance, never the class): a download the pipeline rejects (an HTTP
status other than 200, an empty body, an image it cannot convert) or one that raised (DNS, refused
connection, timeout) is recorded by URL, reason and size seen. Downloads cancelled by
``DOWNLOAD_MAXSIZE`` and bodies over it once decompressed are already counted by the plugin's
downloader middlewares; other ``IgnoreRequest``s are filters (offsite, robots.txt), which Scrapy
itself does not treat as failures. Runs in the crawl process, on the reactor thread.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from pytest_crawlmem.core.dropped import MEDIA_FAILED, DropLedger
from pytest_crawlmem.core.models import MediaSummary, RetentionPath
from pytest_crawlmem.probes import readings as probes

_DETAIL_CHARS = 80


def media_failed_reason(status: int | None, exc: BaseException) -> str:
    """``media download failed (404)``, or ``(empty-content)`` with a 200: the reason of a download the pipeline rejected."""
    detail = str(status) if status is not None and status != 200 else str(exc).strip() or type(exc).__name__
    return f"{MEDIA_FAILED} ({detail[:_DETAIL_CHARS]})"


def _is_counted_elsewhere(exc: object) -> bool:
    """Size-limit drops (counted by the downloader middlewares) and filters (not failures) are not recorded here."""
    from scrapy.exceptions import IgnoreRequest

    from pytest_crawlmem.probes.readings import DOWNLOAD_CANCELLED

    return isinstance(exc, (IgnoreRequest, *DOWNLOAD_CANCELLED))


async def _awaited(outcome: Awaitable[Any], record: Callable[[BaseException], None]) -> Any:
    try:
        return await outcome
    except Exception as exc:
        record(exc)
        raise


def watch_pipeline(pipeline: Any, ledger: DropLedger) -> bool:
    """Wrap one media pipeline instance so its failed downloads go to ``ledger``; return whether it was wrapped."""
    if getattr(pipeline, "_crawlmem_watched", False):
        return False
    downloaded, failed = pipeline.media_downloaded, pipeline.media_failed
    # Scrapy hands what media_downloaded raised to media_failed too, with the same request: each failure is recorded once
    recorded: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()

    def media_downloaded(response: Any, request: Any, info: Any, *args: Any, **kwargs: Any) -> Any:
        url, status, size = request.url, getattr(response, "status", None), len(getattr(response, "body", b""))

        def record(exc: BaseException) -> None:
            with contextlib.suppress(Exception):  # the measurement must never change what the pipeline sees
                ledger.drop(url, media_failed_reason(status, exc), size)
                recorded[request] = True

        try:
            outcome = downloaded(response, request, info, *args, **kwargs)
        except Exception as exc:
            record(exc)
            raise
        if hasattr(outcome, "addErrback"):  # a Deferred (older pipelines)

            def record_failure(failure: Any) -> Any:
                record(failure.value)
                return failure

            return outcome.addErrback(record_failure)
        if inspect.isawaitable(outcome):
            return _awaited(outcome, record)
        return outcome

    def media_failed(failure: Any, request: Any, info: Any) -> Any:
        with contextlib.suppress(Exception):
            value = getattr(failure, "value", None)
            if not recorded.pop(request, False) and isinstance(value, BaseException) and not _is_counted_elsewhere(value):
                ledger.drop(request.url, f"{MEDIA_FAILED} ({type(value).__name__})", None)
        return failed(failure, request, info)

    try:
        pipeline.media_downloaded = media_downloaded
        pipeline.media_failed = media_failed
        pipeline._crawlmem_watched = True
    except AttributeError:  # a pipeline with __slots__: left as it is
        return False
    return True


def watch_media_failures(pipelines: list[Any], ledger: DropLedger) -> None:
    """Wrap every media pipeline of the crawl (found with :func:`probes.media_pipelines` once they opened)."""
    for pipeline in pipelines:
        watch_pipeline(pipeline, ledger)


def summarize_media(pipelines: list[Any]) -> MediaSummary | None:
    """The pipelines' cache at close: entries, failures, and the Scrapy objects the failures keep alive (by class, with a path).

    Holds no reference to what it counted once it returns.
    """
    if not pipelines:
        return None
    failures = probes.media_cache_failures(pipelines)
    counts: dict[str, int] = {}
    paths: dict[str, str] = {}
    seen: set[int] = set()
    for pipeline_name, failure in failures:
        for obj, route in probes.objects_kept_by_failure(failure):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            class_name = type(obj).__name__
            counts[class_name] = counts.get(class_name, 0) + 1
            paths.setdefault(class_name, f"{pipeline_name}.spiderinfo.downloaded[fingerprint] -> {route} -> {class_name}")
    retained = tuple(RetentionPath(name, count, paths[name]) for name, count in sorted(counts.items(), key=lambda kv: -kv[1]))
    return MediaSummary(
        pipelines=tuple(type(p).__name__ for p in pipelines),
        cached_at_close=probes.read_media_cached(pipelines) or 0,
        failed_at_close=len(failures),
        retained=retained,
    )
