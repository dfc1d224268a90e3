"""Failing a test with one message, once (pytest process).

``pytest.fail(..., pytrace=False)`` called while handling an exception prints that exception too, then "During handling
of the above exception, another exception occurred:", then the message: the same words twice when the message states
the cause. :func:`fail` drops the chained exception, so the message is all the report says.
"""

from __future__ import annotations

from typing import NoReturn

import pytest


def fail(message: str) -> NoReturn:
    """Fail the running test with ``message`` alone: no traceback, no chained exception."""
    raise pytest.fail.Exception(message, pytrace=False) from None
