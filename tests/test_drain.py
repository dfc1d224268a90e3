"""What a checkpoint that did not drain says was still running (pure core logic, no crawl)."""

from __future__ import annotations

from pytest_crawlmem.core.drain import holders_phrase, media_phrase


def test_an_undrained_checkpoint_names_the_downloads_and_the_callbacks_still_running():
    phrase = holders_phrase(2, {"BooksSpider.parse_book": 3, "BooksSpider.parse": 1})
    assert phrase == ("2 downloads still in progress (pages navigating or plain downloads) and 4 responses in callbacks"
                      " (BooksSpider.parse_book 3, BooksSpider.parse 1)")


def test_one_of_each_is_singular_and_nothing_running_says_nothing():
    assert holders_phrase(1, {}) == "1 download still in progress (pages navigating or plain downloads)"
    assert holders_phrase(0, {"S.parse": 1}) == "1 response in callbacks (S.parse 1)"
    assert holders_phrase(0, {}) == ""


def test_the_media_downloads_that_held_a_drain_are_named_with_their_retries():
    downloads = [("FilesPipeline", f"http://x/media/missing/{i}.jpg", i % 3) for i in range(5)]
    phrase = media_phrase(downloads)
    assert phrase.startswith("5 downloads of FilesPipeline (http://x/media/missing/2.jpg retried 2 times, "), phrase
    assert phrase.endswith(", 2 more)"), phrase
    assert media_phrase([]) == ""
