"""Keywords of the measuring fixtures that are really misspelt options (pure: no pytest, no Scrapy).

``crawl()``, ``crawl_cluster()`` and ``crawl_sweep()`` pass unknown keywords to the spider, as
``scrapy crawl -a name=value`` does. A keyword one edit away from one of the fixture's own options
(``replay_copy`` for ``replay_copies``), or in an option namespace (``replay_*``, ``isolate*``), is a
typo that would silently become a spider attribute: it is refused, with the option it meant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: Prefixes that belong to the fixtures' own options: a spider argument there is taken for a typo.
NAMESPACES = ("replay_", "isolat")  # isolate, isolated, isolation


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (insertions, deletions, substitutions, adjacent swaps) between ``a`` and ``b``."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[len(b)]


def misspelt_option(keyword: str, options: Iterable[str]) -> str | None:
    """The option ``keyword`` was meant to be (or ``""`` if none fits), or ``None`` when it may be a spider argument."""
    known = sorted(set(options))
    if keyword in known:
        return None
    near = [o for o in known if edit_distance(keyword, o) <= 1]
    if near:
        return near[0]
    if keyword.startswith(NAMESPACES):
        close = difflib.get_close_matches(keyword, known, n=1, cutoff=0.5)
        return close[0] if close else ""
    return None


def refuse_misspelt(
    fixture: str, keywords: Iterable[str], options: Iterable[str], declared: Iterable[str] = ()
) -> str | None:
    """One sentence refusing every misspelt keyword of a ``fixture()`` call, or ``None`` when all may be spider arguments.

    ``declared`` are the spider's own arguments (its ``__init__`` parameters and class attributes): those are
    never typos, however close to an option (``start_url`` of a spider run as ``scrapy crawl x -a start_url=...``).
    """
    known = sorted(set(options))
    own = set(declared)
    problems = []
    for keyword in keywords:
        meant = None if keyword in own else misspelt_option(keyword, known)
        if meant is None:
            continue
        hint = f"did you mean {meant}=?" if meant else f"{fixture}() has no option {keyword}="
        problems.append(f"{keyword}= ({hint})")
    if not problems:
        return None
    return (
        f"{fixture}() got {', '.join(problems)}: a keyword this close to one of its options is taken for a typo,"
        f" not passed to the spider (its options: {', '.join(known)}; spider arguments, as scrapy crawl -a name=value,"
        " are any other keyword, and any the spider declares in __init__ or as a class attribute)"
    )
