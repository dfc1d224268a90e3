"""Holders the walk reaches (pure: real ``scrapy.Request`` objects, no engine): a list handed from request to request
in ``request.meta``, found in the queued requests, and a project object set on the spider holding a dict of lists;
the line that stores into each is named."""

from __future__ import annotations

from scrapy import Request

from pytest_crawlmem.attribution.holders import QueuedRequests, container_lengths, find_keepers


class _Response:
    def __init__(self, meta: dict) -> None:
        self.meta = meta


def parse_product(response: _Response) -> None:
    response.meta["history"].append(b"x" * 1024)  # the keeping line


def test_a_history_shared_through_request_meta_is_a_holder_and_its_append_is_named():
    history: list[bytes] = []
    queued = [Request(f"http://x/{i}", meta={"history": history, "depth": 1}) for i in range(30)]
    before = container_lengths({"queued requests": QueuedRequests(queued)})
    for i in range(100):  # a hundred products append; the queue moves on to other requests sharing the same list
        parse_product(_Response(queued[i % 30].meta))
    queued = [Request(f"http://x/{i}", meta={"history": history}) for i in range(30, 70)]
    (holder, _), = find_keepers({"queued requests": QueuedRequests(queued)}, before, 100)
    assert holder.path == "queued requests.meta['history'] -> list[100]"
    assert holder.gained == 100
    assert holder.line is not None and holder.line.endswith(f"test_holders_reach.py:{parse_product.__code__.co_firstlineno + 1}")


def test_containers_of_their_own_per_request_are_no_holder():
    """Each request carrying a fresh list (or cookies, headers) is a new container at every checkpoint: never one
    that grew, however many requests the queue holds."""
    before = container_lengths({"queued requests": QueuedRequests(
        [Request(f"http://x/{i}", meta={"seen": [i]}, cb_kwargs={"tags": {"a"}}) for i in range(10)])})
    after = QueuedRequests([Request(f"http://x/{i}", meta={"seen": list(range(50))}, cb_kwargs={"tags": set(range(50))})
                            for i in range(200)])
    assert after.meta == {} and after.cb_kwargs == {}
    assert find_keepers({"queued requests": after}, before, 100) == []


class State:
    """A project object the spider holds (``self.state = State()``), filing items by group two levels below it."""

    def __init__(self) -> None:
        self.done: dict[str, list[bytes]] = {}


class Spider:
    def __init__(self) -> None:
        self.state = State()

    def parse_product(self, url: str) -> None:
        self.state.done.setdefault(url[-1], []).append(b"x" * 1024)  # the keeping line


def test_a_project_object_on_the_spider_is_walked_into():
    """A nested keeper over 294 responses was named in 2 of 10 runs: the walk stopped at ``spider.state``."""
    spider = Spider()
    before = container_lengths({"spider": spider})
    for i in range(100):
        spider.parse_product(f"http://x/{i}")
    (holder, _), = find_keepers({"spider": spider}, before, 100)
    assert holder.path == "spider.state.done[…] -> 10 lists[100]"
    assert holder.line is not None and holder.line.endswith(
        f"test_holders_reach.py:{Spider.parse_product.__code__.co_firstlineno + 1}")


def test_reading_the_queued_requests_creates_no_meta_or_cb_kwargs():
    """Scrapy creates a request's ``meta`` and ``cb_kwargs`` dicts on first access: the walk must not."""
    bare = Request("http://x/1")
    QueuedRequests([bare])
    assert bare._meta is None and bare._cb_kwargs is None
