"""One inner pytest session shared by the tests of a module: run through pytester by the first test that needs it.

pytester is function-scoped, so a module's cases cannot share it through a module fixture; the first test to ask
runs the inner session in its pytester directory (kept to the end of the session) and the others read that run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_RUNS: dict[str, tuple[pytest.RunResult, Path] | BaseException] = {}


def inner_session(
    pytester: pytest.Pytester, suite: str, ini: str, *args: str, timeout: float
) -> tuple[pytest.RunResult, Path]:
    """``(outcome, directory)`` of ``pytest test_suite.py`` run on ``suite`` once per source (``-p no:xdist``).

    A run that raised (its timeout) raises again for every later test instead of being run again.
    """
    if suite not in _RUNS:
        (pytester.path / "test_suite.py").write_text(suite)  # as written: makepyfile strips it, moving every line up
        pytester.makeini(ini)
        try:
            outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", *args, "test_suite.py",
                                                    timeout=timeout)
        except Exception as exc:
            _RUNS[suite] = exc
            raise
        _RUNS[suite] = (outcome, pytester.path)
    run = _RUNS[suite]
    if isinstance(run, BaseException):
        raise run
    return run
