"""Every error the plugin raises appears once, and short: no chained duplicate, no list of a large project's spiders.

One inner session (pytester, a subprocess) holds every case: none of them crawls.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from inner_session import inner_session

import pytest_crawlmem

#: A project of 303 spiders: three longchamp ones among 300 shops (a team's project has thousands).
MANY_SPIDERS = '''
import scrapy

for _name in ["longchamp_us", "longchamp_uk", "longchamp_fr"] + [f"shop_{i:03d}" for i in range(300)]:
    globals()[_name] = type(_name, (scrapy.Spider,), {"name": _name})
'''

CASES = '''
import scrapy


class Plain(scrapy.Spider):
    name = "plain"


def test_misspelt_name(crawl):
    crawl("longchamp_su")


def test_unknown_name_close_to_none(crawl):
    crawl("zzzzzzzz")


def test_missing_recording(crawl):
    crawl(Plain, replay="nowhere.har")


def test_wrong_recording(crawl):
    crawl(Plain, replay="wrong.har")


def test_bad_governor(crawl):
    crawl(Plain, governor="plenty")
'''


@pytest.fixture
def inner(pytester: pytest.Pytester) -> str:
    """The inner session's output, run once in a Scrapy project of 303 spiders (its short summary off: each failure
    shows once, in its own section)."""
    (pytester.path / "scrapy.cfg").write_text("[settings]\ndefault = bigproject.settings\n")
    spiders = pytester.path / "bigproject" / "spiders"
    spiders.mkdir(parents=True, exist_ok=True)
    (spiders.parent / "__init__.py").write_text("")
    (spiders.parent / "settings.py").write_text("SPIDER_MODULES = ['bigproject.spiders']\n")
    (spiders / "__init__.py").write_text("")
    (spiders / "many.py").write_text(MANY_SPIDERS)
    (pytester.path / "wrong.har").write_text("this is not a HAR file\n")
    outcome, _ = inner_session(pytester, CASES, "[pytest]\n", "-rN", timeout=300)
    return str(outcome.stdout)


def section(text: str, test: str) -> str:
    """The failure section of ``test`` in the session output."""
    start = text.index(f"_ {test} _")
    following = text.find("\n___", start + 1)
    return text[start:following if following != -1 else len(text)]


def test_a_misspelt_spider_name_lists_the_closest_few_names_once(inner):
    failure = section(inner, "test_misspelt_name")
    assert "did you mean 'longchamp_us'?" in failure, failure
    assert failure.count("no spider named 'longchamp_su'") == 1, failure
    assert "shop_1" not in failure, failure  # not the whole project
    assert len(failure) < 800, failure


def test_a_name_close_to_none_says_how_many_spiders_there_are_without_listing_them(inner):
    failure = section(inner, "test_unknown_name_close_to_none")
    assert failure.count("no spider named 'zzzzzzzz'") == 1, failure
    assert "303 spiders" in failure and "scrapy list" in failure, failure
    assert "shop_1" not in failure, failure


@pytest.mark.parametrize(("test", "words"), [
    ("test_missing_recording", "nowhere.har: no such file or directory"),
    ("test_wrong_recording", "wrong.har"),
    ("test_bad_governor", "crawl(governor='plenty')"),
])
def test_each_error_appears_once_without_its_chained_cause(inner, test, words):
    failure = section(inner, test)
    assert failure.count(words) == 1, failure
    assert "During handling of the above exception" not in failure, failure
    assert "The above exception was the direct cause" not in failure, failure


def _repeating_raises(tree: ast.AST) -> list[int]:
    """Lines of a failure raised inside an ``except ... as exc`` block that chains the caught error it also states.

    ``pytest.fail(...)`` there prints the caught error, then "During handling...", then the message again;
    ``raise X(f"...{exc}") from exc`` prints the cause, then the same words.
    """
    lines = []
    for handler in ast.walk(tree):
        if not isinstance(handler, ast.ExceptHandler):
            continue
        for node in (n for statement in handler.body for n in ast.walk(statement)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "pytest.fail":
                lines.append(node.lineno)
            if (isinstance(node, ast.Raise) and node.cause is not None and handler.name
                    and ast.unparse(node.cause) == handler.name and node.exc is not None
                    and not ast.unparse(node.exc).startswith("pytest.UsageError(")  # pytest prints its message alone
                    and any(isinstance(n, ast.Name) and n.id == handler.name for n in ast.walk(node.exc))):
                lines.append(node.lineno)
    return lines


def test_no_error_of_the_harness_restates_the_error_it_chains():
    package = Path(pytest_crawlmem.__file__).parent
    found = {
        f"{path.relative_to(package)}:{line}"
        for path in (*package.glob("harness/*.py"), package / "plugin.py")
        for line in _repeating_raises(ast.parse(path.read_text()))
    }
    assert not found, sorted(found)


def test_the_checker_finds_both_shapes():
    source = textwrap.dedent('''
        try:
            pass
        except ValueError as exc:
            pytest.fail(str(exc), pytrace=False)
        except OSError as exc:
            raise RuntimeError(f"cannot: {exc}") from exc
        except KeyError as exc:
            raise RuntimeError("cannot") from exc
        except TypeError as exc:
            raise pytest.UsageError(str(exc)) from exc
    ''')
    assert _repeating_raises(ast.parse(source)) == [5, 7]
