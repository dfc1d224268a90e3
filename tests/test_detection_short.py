"""Short crawls are judged (issue 26): 4 KiB kept per product over ~150 responses is a leak, a clean one is steady.

Each crawl runs in a pytester subprocess (a reactor per process); the tests read what the crawl judged.
"""

from __future__ import annotations

import json

import pytest
from spiders_source import CATALOG_SPIDER

SUITE = '''
import json

import pytest
import scrapy


''' + CATALOG_SPIDER + '''

class Keeper(Catalog):
    """Keeps 4 KiB per product page in a list on the spider (about 3.9 KiB per response)."""

    name = "keeper"
    kept = []
    leak = 4096

    def parse_product(self, response):
        self.kept.append(b"x" * int(self.leak))  # a new object each time (b"x" * 4096 is one folded constant)
        yield from super().parse_product(response)


@pytest.mark.crawl_memory(leak="warn")
@pytest.mark.parametrize("spider", [Keeper, Catalog], ids=["keeper", "clean"])
def test_short(crawl, fixture_site, spider):
    Keeper.kept = []
    result = crawl(spider, start_urls=[fixture_site.url("/catalog/?pages=7&per_page=20")])  # 147 responses
    growth = result.growth
    with open(f"{spider.name}.json", "w") as out:
        json.dump({"responses": result.responses, "verdict": result.verdict, "reason": growth.reason,
                   "detectable": growth.detectable_per_response_bytes}, out)
'''


def crawl_short(pytester: pytest.Pytester, which: str) -> dict[str, object]:
    """Run the ~150-response crawl of ``which`` (keeper or clean) in a pytester subprocess; return what it judged."""
    pytester.makepyfile(test_short=SUITE)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", which, timeout=600)
    outcome.assert_outcomes(passed=1)
    name = "keeper" if which == "keeper" else "catalog"
    return json.loads((pytester.path / f"{name}.json").read_text())  # type: ignore[no-any-return]


def test_a_4_kib_leak_over_150_responses_is_retained_objects(pytester: pytest.Pytester) -> None:
    keeper = crawl_short(pytester, "keeper")
    assert 140 <= keeper["responses"] <= 160
    assert keeper["verdict"] == "retained-objects", keeper["reason"]


def test_a_clean_150_response_crawl_is_never_a_leak_and_states_its_bound_when_steady(pytester: pytest.Pytester) -> None:
    clean = crawl_short(pytester, "clean")
    # never a leak; on a loaded machine its checkpoints may not all drain (CI saw 2 of 4 after the warm-up): then
    # inconclusive, saying how many responses would judge
    assert clean["verdict"] in ("steady", "inconclusive"), clean["reason"]
    if clean["verdict"] == "inconclusive":
        assert "crawl at least" in clean["reason"], clean["reason"]
        return
    assert clean["detectable"] is not None and clean["detectable"] <= 8 * 1024, clean  # type: ignore[operator]
    assert "or more (95%)" in clean["reason"]
