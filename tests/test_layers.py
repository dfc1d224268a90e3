"""The import rules, checked rather than stated: the pure core imports no pytest, Scrapy, Twisted, psutil or I/O."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_crawlmem"
FIXTURE_SITES = PACKAGE.parent / "fixture_sites"

#: The pure core: figures, verdicts, budgets, stop reasons, result assembly. Runs in any process, tested directly.
CORE = (
    "assemble", "budgets", "cluster", "defaults", "distribution", "dropped", "excess", "growth", "jobverdict", "ledger",
    "models", "protocols",
    "shots", "stops", "svgchart", "sweep", "timeline", "tolerances", "units",
)
#: What the core must not import: the test runner, the crawler, processes, threads, files and the network.
FORBIDDEN = {
    "pytest", "_pytest", "pytest_twisted", "scrapy", "twisted", "psutil", "playwright", "redis", "os", "io", "socket",
    "subprocess", "fcntl", "shutil", "tempfile", "threading", "asyncio", "http", "urllib", "ctypes", "gc", "tracemalloc",
}
#: Calls that read or write files.
IO_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink", "rmdir", "touch", "iterdir",
            "glob", "rglob"}


def imports_of(path: Path) -> tuple[set[str], set[str], set[str]]:
    """Top-level packages imported (anywhere in the file, lazy imports too), sibling modules imported, I/O calls made.

    Imports under ``if TYPE_CHECKING:`` are for annotations only and never run: they are left out.
    """
    external, siblings, io = set(), set(), set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            external.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                external.add(node.module.split(".")[0])
            elif node.module:
                siblings.add(node.module.split(".")[0])
            else:
                siblings.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in IO_CALLS:
                io.add(name)
    return external, siblings, io


@pytest.mark.parametrize("module", CORE)
def test_a_core_module_imports_no_pytest_scrapy_or_io_and_only_other_core_modules(module):
    external, siblings, io = imports_of(PACKAGE / f"{module}.py")
    assert not external & FORBIDDEN, f"{module}.py imports {sorted(external & FORBIDDEN)}"
    assert siblings <= set(CORE), f"{module}.py imports {sorted(siblings - set(CORE))}, outside the pure core"
    assert not io, f"{module}.py does file I/O: {sorted(io)}"


def test_the_core_list_names_real_modules():
    assert all((PACKAGE / f"{module}.py").is_file() for module in CORE)


def test_the_public_surface_imports_no_pytest_or_scrapy():
    """``import pytest_crawlmem`` (the CLI, an isolated child, a user's type hints) pulls in only the core."""
    external, siblings, _ = imports_of(PACKAGE / "__init__.py")
    assert not external & FORBIDDEN and siblings <= set(CORE)


def test_the_plugin_and_the_fixture_site_never_import_each_other():
    for path in PACKAGE.glob("*.py"):
        assert "fixture_sites" not in imports_of(path)[0], path.name
    for path in FIXTURE_SITES.rglob("*.py"):
        assert "pytest_crawlmem" not in imports_of(path)[0], path.name


def test_no_stop_reason_is_spelled_outside_the_stops_module():
    from pytest_crawlmem.stops import HARNESS_STOPS

    for path in PACKAGE.glob("*.py"):
        if path.name == "stops.py":
            continue
        constants = {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)}
        assert not constants & HARNESS_STOPS, f"{path.name} spells {sorted(constants & HARNESS_STOPS)}: use pytest_crawlmem.stops"
