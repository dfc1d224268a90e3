"""The docs: generated tables match the code, links resolve, the README stays short (pure, no crawl)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_crawlmem.core.budgets import SPECS
from pytest_crawlmem.reports import docgen

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Pages other parts of the project write; the index links them before they land.
PAGES_OF_OTHERS = {"detection.md", "replay.md", "cluster.md", "production.md"}


def test_the_generated_tables_match_the_code():
    stale = docgen.stale_files(DOCS)
    assert not stale, (f"{', '.join(str(p.relative_to(ROOT)) for p in stale)}: the generated tables differ from the code;"
                       f" run `{docgen.COMMAND}` to regenerate them")


def test_every_enforced_budget_is_in_the_budget_table():
    text = (DOCS / "budgets.md").read_text()
    for name, spec in SPECS.items():
        assert (f"| `{name}` |" in text) == spec.enforced, name


def test_a_table_that_drifted_is_found_and_rewritten(tmp_path, capsys):
    page = tmp_path / "budgets.md"
    page.write_text("# Budgets\n\n<!-- generated: budgets -->\n| `peak_rss` | old |\n<!-- end generated -->\n\nmore\n")
    assert docgen.main([str(tmp_path), "--check"]) == 1
    assert f"run `{docgen.COMMAND}` to regenerate them" in capsys.readouterr().out
    assert docgen.main([str(tmp_path)]) == 0
    assert docgen.main([str(tmp_path), "--check"]) == 0
    text = page.read_text()
    assert "| `max_scheduled` |" in text and text.endswith("<!-- end generated -->\n\nmore\n")


def test_an_unknown_block_is_an_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match=r"unknown generated block 'colours' in page.md"):
        docgen.render("<!-- generated: colours -->\nx\n<!-- end generated -->\n", source="page.md")
    assert docgen.main([str(tmp_path / "missing")]) == 2


def test_the_readme_is_a_short_guide_with_the_two_commands_at_the_top():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 8 * 1024, f"README.md is {len(readme.encode()):,} bytes: move reference to docs/"
    head = readme[:600]
    assert "python3 -m pytest -n 2 --dist loadfile -p no:cacheprovider" in head  # what .ci/run runs
    assert "pip install" in head


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", [ROOT / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", page.read_text()):
        if "://" in target or target.startswith("mailto:") or (not target and not anchor):
            continue
        path = (page.parent / target).resolve() if target else page
        assert path.exists() or path.name in PAGES_OF_OTHERS, f"{page.name} links to {target}, which does not exist"
        if anchor and path.suffix == ".md" and path.exists():
            assert anchor in _anchors(path), f"{page.name} links to {target}#{anchor}: no such heading in {path.name}"


def test_the_browser_page_states_the_pss_read_interval_the_code_defaults_to():
    from pytest_crawlmem.core.defaults import CRAWLMEM_DEFAULTS

    seconds = CRAWLMEM_DEFAULTS["CRAWLMEM_BROWSER_DETAIL_SECONDS"]
    text = " ".join((DOCS / "browser.md").read_text().split())
    assert f"at most every {seconds:g} s (`CRAWLMEM_BROWSER_DETAIL_SECONDS`, default {seconds})" in text
    assert not re.search(r"PSS[^.]*once a second", text), "the page says PSS is read once a second"
