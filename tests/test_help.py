"""`pytest --help` with the plugin installed: every crawlmem option and ini key is rendered (subprocess)."""

from __future__ import annotations

import re

import pytest

from pytest_crawlmem.core.budgets import SPECS
from pytest_crawlmem.core.settings import OPTIONS


def test_pytest_help_renders_every_crawlmem_option_and_ini_key(pytester: pytest.Pytester) -> None:
    outcome = pytester.runpytest_subprocess("--help", "-p", "no:cacheprovider", timeout=120)
    assert outcome.ret == 0, outcome.stderr.str()
    text = re.sub(r"\s+", " ", outcome.stdout.str())
    for option in OPTIONS:
        first_words = " ".join(option.help.split()[:4])
        assert option.flag in text, f"{option.flag} missing from pytest --help"
        assert first_words in text, f"help of {option.flag} not rendered: {first_words!r}"
        assert option.dest in text, f"ini key {option.dest} missing from pytest --help"
    assert "PERCENT%" in text and "%%" not in text  # the literal percent sign, unescaped once rendered
    for name, spec in SPECS.items():
        if spec.enforced:
            assert f"crawlmem_{name}" in text, f"ini budget crawlmem_{name} missing from pytest --help"
