"""The stable path of ``crawlmem record``'s helpers (``from pytest_crawlmem.record import record_command``).

The code lives in :mod:`pytest_crawlmem.reports.record`.
"""

from pytest_crawlmem.reports.record import describe, record_command, summarize

__all__ = ["describe", "record_command", "summarize"]
