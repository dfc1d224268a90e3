"""New leaks against a control (core/leakset.py, reports/leakdiff.py) and ``--crawlmem-fail-on``, without a crawl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_crawlmem.core.leakset import Leak, diff_leaks, format_diff, leaks_of_runs
from pytest_crawlmem.core.settings import parse_fail_on, resolve_settings
from pytest_crawlmem.reports import cli


def leak(fingerprint: str, test: str = "t.py::a") -> Leak:
    return Leak(fingerprint, test, "retained-objects", "spiders.py:40", ("holder spider.kept -> list",))


def test_a_leak_is_new_when_its_fingerprint_is_in_no_control_leak_whatever_the_test():
    diff = diff_leaks([leak("aa"), leak("bb", "t.py::b")], [leak("aa", "t.py::moved"), leak("cc")])
    assert [x.fingerprint for x in diff.new] == ["cc"]
    assert [x.fingerprint for x in diff.known] == ["aa"]
    assert [x.fingerprint for x in diff.gone] == ["bb"]
    assert diff.has_new
    assert not diff_leaks([leak("aa")], [leak("aa"), leak("aa", "t.py::c")]).has_new
    assert not diff_leaks([], []).has_new


def test_the_listing_names_each_leak_with_its_test_line_and_holder():
    lines = format_diff(diff_leaks([leak("aa")], [leak("aa"), leak("cc", "t.py::new")]), "main", ".crawlmem")
    assert lines[:3] == ["control:   main", "treatment: .crawlmem", ""]
    assert "  NEW   cc retained-objects in t.py::new at spiders.py:40 (holder spider.kept -> list)" in lines
    assert "  known aa retained-objects in t.py::a at spiders.py:40 (holder spider.kept -> list)" in lines
    assert "no new leak" in format_diff(diff_leaks([leak("aa")], [leak("aa")]), "a", "b")[3]


def test_a_baseline_control_counts_every_run_and_a_treatment_each_tests_newest():
    runs = {"t.py::a": [{"leak_fingerprint": "old", "verdict": "retained-objects"}, {"leak_fingerprint": None}],
            "t.py::b": [{"leak_fingerprint": "bb", "leak_where": "s.py:3"}]}
    assert [x.fingerprint for x in leaks_of_runs(runs)] == ["old", "bb"]
    assert [x.fingerprint for x in leaks_of_runs(runs, newest_only=True)] == ["bb"]
    assert leaks_of_runs(runs)[1].where == "s.py:3"


def baseline(path: Path, runs: dict[str, list[dict[str, object]]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "name": path.stem, "tests": runs}))
    return path


def test_the_command_reads_baseline_names_on_every_machine_and_exits_1_only_for_a_new_leak(tmp_path, capsys):
    baselines = tmp_path / "baselines"
    baseline(baselines / "machine-a" / "main.json", {"t.py::a": [{"leak_fingerprint": "aa"}]})
    baseline(baselines / "machine-b" / "main.json", {"t.py::b": [{"leak_fingerprint": "bb"}]})
    baseline(baselines / "machine-a" / "pr.json", {"t.py::a": [{"leak_fingerprint": "aa"}, {"leak_fingerprint": "bb"}]})
    baseline(baselines / "machine-a" / "pr2.json", {"t.py::a": [{"leak_fingerprint": "cc"}]})
    args = ["diff", "--new-leaks", "--baseline-dir", str(baselines)]
    assert cli.main([*args, "main", "pr"]) == 0
    assert cli.main([*args, "main", "pr2"]) == 1
    assert "NEW   cc" in capsys.readouterr().out
    assert cli.main([*args, str(baselines / "machine-a" / "main.json"), "pr"]) == 1  # a file: that machine's runs only


def test_unusable_arguments_are_errors_naming_them(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "other.json").write_text("{}")
    args = ["diff", "--new-leaks", "--baseline-dir", str(tmp_path / "baselines")]
    assert cli.main([*args, str(tmp_path / "empty"), str(tmp_path / "empty")]) == 2
    assert "no report.json in this directory" in capsys.readouterr().err
    assert cli.main([*args, "nothing", "nothing"]) == 2
    assert "no baseline of that name" in capsys.readouterr().err
    assert cli.main([*args, str(tmp_path / "other.json"), "x"]) == 2
    assert "neither a report.json nor a baseline file" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "expected"), [
    ("regressions", {"regressions"}), ("new-leaks", {"new-leaks"}), ("new-leaks, regressions", {"regressions", "new-leaks"}),
])
def test_fail_on_takes_regressions_new_leaks_or_both(value, expected):
    assert parse_fail_on(value, "ini crawlmem_fail_on") == expected


def test_fail_on_comes_from_the_command_line_over_the_ini_and_a_bad_value_names_its_source(tmp_path):
    def settings(cli_value: object, ini_value: object) -> frozenset[str]:
        return resolve_settings(lambda d: cli_value if d == "crawlmem_fail_on" else None,
                                lambda d: ini_value if d == "crawlmem_fail_on" else None, tmp_path).fail_on

    assert settings(None, None) == {"regressions"}
    assert settings(None, "new-leaks") == {"new-leaks"}
    assert settings("regressions", "new-leaks") == {"regressions"}
    with pytest.raises(ValueError, match=r"invalid fail-on 'new_leaks' from ini crawlmem_fail_on: expected regressions"):
        settings(None, "new_leaks")
    with pytest.raises(ValueError, match=r"from command line --crawlmem-fail-on"):
        settings("leaks", None)
