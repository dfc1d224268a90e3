"""Why the harness stops a crawl or job: the ``finish_reason`` vocabulary, the one ``kill_at`` check, the sentences (pure).

Every module that stops a crawl (the extension, the browser job, the isolated parent) or reads why one stopped
(budgets, sweeps, the isolated parent) uses these names; the reason travels as data, the sentence is for people.
"""

from __future__ import annotations

from typing import Final

#: RSS stayed at or over the hard ceiling ``kill_at``.
KILL_AT: Final = "crawlmem_kill_at"
#: The crawl ran past the budget ``timeout``.
TIMEOUT: Final = "crawlmem_timeout"
#: A browser crawl stalled with every context full of pages handed to callbacks and never closed.
UNCLOSED_PAGES: Final = "crawlmem_unclosed_pages"
#: A SIGINT (Ctrl-C) or SIGTERM (a CI job's timeout or cancel) closed the crawl early.
INTERRUPTED: Final = "crawlmem_interrupted"
#: An isolated crawl's process died without saying why (crashed, or killed from outside).
KILLED: Final = "crawlmem_killed"
#: A browser job whose function raised.
ERROR: Final = "error"
#: A browser job that ran to its end (Scrapy's own reason for a crawl that did).
FINISHED: Final = "finished"
#: The memory governor closed the crawl to keep it inside its budget (the close is the governor's, not the harness's).
MEMORY_BUDGET: Final = "memory_budget"

#: The reasons the harness gives a crawl it stopped (never Scrapy's own).
HARNESS_STOPS: Final = frozenset({KILL_AT, TIMEOUT, UNCLOSED_PAGES, INTERRUPTED, KILLED})

INTERRUPTED_MESSAGE: Final = (
    "interrupted by SIGINT (Ctrl-C): the crawl was closed early; press Ctrl-C again to abort at once"
)


def is_harness_stop(finish_reason: str) -> bool:
    """Whether ``finish_reason`` says the harness stopped the crawl (kill_at, timeout, a killed child...)."""
    return finish_reason in HARNESS_STOPS


def over_kill_at(rss_bytes: int, kill_at_bytes: int | None) -> bool:
    """Whether ``rss_bytes`` is at or over the hard ceiling (never, when there is none)."""
    return bool(kill_at_bytes) and rss_bytes >= (kill_at_bytes or 0)


def kill_at_message(rss_bytes: int, t_seconds: float) -> str:
    """The sentence of a crawl stopped at ``kill_at``."""
    return f"RSS reached {rss_bytes / 2**20:,.1f} MiB at {t_seconds:.1f} s, the hard ceiling kill_at"


def timeout_message(
    timeout_seconds: float, what: str = "crawl", *, paused_seconds: float = 0.0, attribution_seconds: float = 0.0
) -> str:
    """The sentence of a crawl (or job) stopped at the budget ``timeout``. When the plugin's pauses took a material share
    of it (``paused_seconds``, ``attribution_seconds`` of them finding what leaks), they are told apart from the crawl's
    own time."""
    if paused_seconds < max(0.5, 0.05 * timeout_seconds):
        return f"the {what} was still running after {timeout_seconds:g} s, the budget timeout"
    finding = f", {attribution_seconds:,.1f} s of them finding what leaks" if attribution_seconds >= 0.05 else ""
    own = max(0.0, timeout_seconds - paused_seconds)
    return (f"the {what} was still running after {timeout_seconds:g} s (the plugin paused it {paused_seconds:,.1f} s"
            f"{finding}; its own time was {own:,.1f} s), the budget timeout")


def killed_at_kill_at_message(rss_bytes: int, grace_seconds: float) -> str:
    """The sentence of an isolated crawl's process killed because it stayed over ``kill_at``."""
    return (
        f"RSS reached {rss_bytes / 2**20:,.1f} MiB and the crawl did not stop within {grace_seconds:g} s:"
        " the isolated process was killed at the hard ceiling kill_at"
    )


def killed_at_timeout_message(timeout_seconds: float, grace_seconds: float) -> str:
    """The sentence of an isolated crawl's process killed because it ran past ``timeout``."""
    return (
        f"the crawl was still running after {timeout_seconds:g} s and did not stop within {grace_seconds:g} s"
        " more: the isolated process was killed at the budget timeout"
    )
