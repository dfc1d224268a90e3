"""One inner pytest session shared by the tests of a module: run through pytester by the first test that needs it
(or several, side by side: :func:`side_by_side`).

pytester is function-scoped, so a module's cases cannot share it through a module fixture; the first test to ask
runs the inner session in its pytester directory (kept to the end of the session) and the others read that run.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
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


_SIDE_BY_SIDE: dict[str, dict[str, tuple[pytest.RunResult, Path]] | BaseException] = {}


def side_by_side(
    pytester: pytest.Pytester, sessions: Mapping[str, Mapping[str, str]], *args: str, parallel: int, timeout: float
) -> dict[str, tuple[pytest.RunResult, Path]]:
    """``{name: (outcome, directory)}`` of one pytest session per entry of ``sessions`` (``{name: {file: source}}``),
    ``parallel`` at a time in the order given, each in its own directory under this pytester's, once per set of
    sessions.

    For sessions that mostly wait (a crawl stalled on purpose, a timeout running out): side by side they wait together
    instead of holding a worker one after the other. A session still running ``timeout`` seconds after it started is
    killed, and every test that asks raises, naming it.
    """
    key = repr(sorted((name, sorted(files.items())) for name, files in sessions.items()))
    if key not in _SIDE_BY_SIDE:
        try:
            _SIDE_BY_SIDE[key] = _run_side_by_side(pytester, sessions, args, parallel, timeout)
        except Exception as exc:
            _SIDE_BY_SIDE[key] = exc
            raise
    runs = _SIDE_BY_SIDE[key]
    if isinstance(runs, BaseException):
        raise runs
    return runs


def _run_side_by_side(
    pytester: pytest.Pytester, sessions: Mapping[str, Mapping[str, str]], args: Sequence[str], parallel: int,
    timeout: float,
) -> dict[str, tuple[pytest.RunResult, Path]]:
    waiting = list(sessions.items())
    running: dict[str, tuple[subprocess.Popen[bytes], Path, float]] = {}
    results: dict[str, tuple[pytest.RunResult, Path]] = {}
    try:
        while waiting or running:
            while waiting and len(running) < parallel:
                name, files = waiting.pop(0)
                running[name] = _start(pytester, name, files, args)
            time.sleep(0.1)
            for name, (process, directory, started) in list(running.items()):
                if process.poll() is None:
                    if time.monotonic() - started > timeout:
                        raise pytest.fail.Exception(f"the inner session {name!r} was still running after {timeout:g} s")
                    continue
                del running[name]
                out = (directory / "stdout").read_text(errors="replace").splitlines()
                err = (directory / "stderr").read_text(errors="replace").splitlines()
                results[name] = (pytest.RunResult(process.returncode, out, err, time.monotonic() - started), directory)
        return {name: results[name] for name in sessions}
    finally:
        for process, _, _ in running.values():
            process.kill()
            process.wait()


def _start(
    pytester: pytest.Pytester, name: str, files: Mapping[str, str], args: Sequence[str]
) -> tuple[subprocess.Popen[bytes], Path, float]:
    """Write a session's files into its directory and start pytest there."""
    directory = pytester.path / name
    directory.mkdir()
    for filename, source in files.items():
        (directory / filename).write_text(source)
    command = [sys.executable, "-m", "pytest", f"--basetemp={directory / 'basetemp'}", "-p", "no:cacheprovider", *args]
    with (directory / "stdout").open("wb") as out, (directory / "stderr").open("wb") as err:
        return pytester.popen(command, stdout=out, stderr=err, cwd=directory), directory, time.monotonic()
