"""The import rules, checked rather than stated: the pure core imports no pytest, Scrapy, Twisted, psutil or I/O."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_crawlmem"
FIXTURE_SITES = PACKAGE.parent / "fixture_sites"
LAYERS = ("core", "reports", "crawl", "harness")
#: Which subpackages each layer may import: the pure core only itself; reports and the crawl process build on the
#: core and never on each other; the pytest side (harness) and the top-level entry modules may use everything.
MAY_IMPORT = {
    "core": {"core"},
    "reports": {"core", "reports"},
    "crawl": {"core", "crawl"},
    "harness": set(LAYERS),
}
#: What the core must not import: the test runner, the crawler, processes, threads, files and the network.
FORBIDDEN = {
    "pytest", "_pytest", "pytest_twisted", "scrapy", "twisted", "psutil", "playwright", "redis", "os", "io", "socket",
    "subprocess", "fcntl", "shutil", "tempfile", "threading", "asyncio", "http", "urllib.request", "ctypes", "gc",
    "tracemalloc",
}
#: What no module outside the pytest side may import (an isolated child, a production crawl and the CLI run without it).
PYTEST = {"pytest", "_pytest", "pytest_twisted"}
#: Calls that read or write files.
IO_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink", "rmdir", "touch", "iterdir",
            "glob", "rglob"}


def modules(layer: str) -> list[Path]:
    """The modules of one subpackage."""
    return sorted((PACKAGE / layer).glob("*.py"))


def imports_of(path: Path) -> tuple[set[str], set[str], set[str]]:
    """Packages imported (anywhere in the file: lazy imports and ``if TYPE_CHECKING:`` ones too), layers imported, I/O calls.

    An import for annotations only still ties a layer to another (a type checker and a reader follow it): it counts.
    """
    external, siblings, io = set(), set(), set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                external.update({alias.name, alias.name.split(".")[0]})
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                external.update({node.module, node.module.split(".")[0]})
            elif node.level == 1 and node.module:
                siblings.add(path.parent.name)
            elif node.module:  # from ..layer.module import x
                siblings.add(node.module.split(".")[0])
            else:  # from . import module / from .. import layer
                siblings.add(path.parent.name if node.level == 1 else "")
        elif isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in IO_CALLS:
                io.add(name)
    return external, siblings, io


@pytest.mark.parametrize("path", modules("core"), ids=lambda path: path.stem)
def test_a_core_module_imports_no_pytest_scrapy_or_io(path):
    external, _, io = imports_of(path)
    assert not external & FORBIDDEN, f"core/{path.name} imports {sorted(external & FORBIDDEN)}"
    assert not io, f"core/{path.name} does file I/O: {sorted(io)}"


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_the_layers_below_it(layer):
    for path in modules(layer):
        _, layers, _ = imports_of(path)
        assert layers <= MAY_IMPORT[layer], f"{layer}/{path.name} imports {sorted(layers - MAY_IMPORT[layer])}"


@pytest.mark.parametrize("layer", ["core", "reports", "crawl"])
def test_only_the_pytest_side_imports_pytest(layer):
    for path in modules(layer):
        external, _, _ = imports_of(path)
        assert not external & PYTEST, f"{layer}/{path.name} imports {sorted(external & PYTEST)}"


def test_every_module_lives_in_a_layer_or_is_an_entry_point():
    """The top level holds only the package, the pytest entry point and the stable dotted paths users write."""
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top == {"__init__", "__main__", "plugin", "extension", "middleware", "testing", "browser", "replay_scrapy",
                   "record", "docgen", "governor", "replay", "spidermon"}
    assert {path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"} == set(LAYERS)


def test_the_public_surface_imports_no_pytest_or_scrapy():
    """``import pytest_crawlmem`` (the CLI, an isolated child, a user's type hints) pulls in only the core."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}
    assert imported and all(module and module.startswith("core.") for module in imported), imported
    assert not imports_of(PACKAGE / "__init__.py")[0] & FORBIDDEN


def test_the_stable_dotted_paths_are_the_classes_scrapy_loads():
    """What users write into EXTENSIONS, DOWNLOADER_MIDDLEWARES, ITEM_PIPELINES and DOWNLOAD_HANDLERS keeps loading."""
    import importlib

    from pytest_crawlmem.core.replay import COPIES_MIDDLEWARE_PATH, HANDLER_PATH
    from pytest_crawlmem.crawl import extension, middleware, replay_scrapy, testing
    from pytest_crawlmem.crawl.runner import EXTENSION_PATH

    def load(path: str) -> object:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)

    assert load(EXTENSION_PATH) is extension.CrawlMemExtension
    assert EXTENSION_PATH == "pytest_crawlmem.extension.CrawlMemExtension"
    assert load(middleware.DOWNLOADER_MIDDLEWARE_PATH) is middleware.CrawlMemDownloaderMiddleware
    assert load(middleware.COUNTING_HTTPCOMPRESSION_PATH) is middleware.CrawlMemHttpCompressionMiddleware
    assert load(HANDLER_PATH) is replay_scrapy.ReplayDownloadHandler
    assert load(COPIES_MIDDLEWARE_PATH) is replay_scrapy.ReplayCopiesMiddleware
    assert load("pytest_crawlmem.testing.SlowPipeline") is testing.SlowPipeline


def test_imports_for_annotations_only_count(tmp_path):
    """An ``if TYPE_CHECKING:`` import of a higher layer breaks the rules like any other import."""
    module = tmp_path / "core" / "typed.py"
    module.parent.mkdir()
    module.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..crawl.browserjob import BrowserJob\n"
                      "    import scrapy\n")
    external, layers, _ = imports_of(module)
    assert "crawl" in layers and "scrapy" in external


def test_the_plugin_and_the_fixture_site_never_import_each_other():
    for path in PACKAGE.rglob("*.py"):
        assert "fixture_sites" not in imports_of(path)[0], path.name
    for path in FIXTURE_SITES.rglob("*.py"):
        assert "pytest_crawlmem" not in imports_of(path)[0], path.name


def test_no_stop_reason_is_spelled_outside_the_stops_module():
    from pytest_crawlmem.core.stops import HARNESS_STOPS

    for path in PACKAGE.rglob("*.py"):
        if path.name == "stops.py":
            continue
        constants = {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if isinstance(node, ast.Constant) and isinstance(node.value, str)}
        assert not constants & HARNESS_STOPS, f"{path.name} spells {sorted(constants & HARNESS_STOPS)}: use core.stops"


#: ``CRAWLMEM_`` names that are not Scrapy settings: an environment variable (crawl/browser.py).
NOT_SETTINGS = frozenset({"CRAWLMEM_CHROMIUM"})


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module's tree (module, classes, functions)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


#: A ``CRAWLMEM_*`` name, wherever it stands in a string.
SETTING_NAME = re.compile(r"CRAWLMEM_[A-Z0-9_]*[A-Z0-9]")


def crawlmem_literals(source: str) -> list[str]:
    """The ``CRAWLMEM_*`` names spelled in the string literals of ``source`` (keys, and inside messages and f-string
    parts; docstrings and comments not)."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    return [name for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for name in SETTING_NAME.findall(node.value) if name not in NOT_SETTINGS]


def test_no_crawlmem_setting_is_spelled_outside_the_settings_table():
    spelled = {str(path.relative_to(PACKAGE)): found for path in PACKAGE.rglob("*.py")
               if path.name != "defaults.py" and (found := crawlmem_literals(path.read_text(encoding="utf-8")))}
    assert not spelled, f"use core.defaults.name_of / settings_of / CrawlMemConfig instead: {spelled}"


def test_report_html_names_no_budget_it_renders_from_the_budgets_row():
    from pytest_crawlmem.core.budgets import SPECS
    from pytest_crawlmem.reports.document import FIGURES

    tree = ast.parse((PACKAGE / "reports" / "html.py").read_text(encoding="utf-8"))
    named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in SPECS}
    assert not named - set(FIGURES), f"reports/html.py names budgets {sorted(named - set(FIGURES))}: read their SPECS row"


def test_the_settings_table_is_a_leaf_so_every_module_can_name_its_settings():
    tree = ast.parse((PACKAGE / "core" / "defaults.py").read_text(encoding="utf-8"))
    relative = [node.module or "." for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert not relative, f"core/defaults.py imports {relative}: a module it imports could not import it (a cycle)"


def test_the_literal_check_sees_keys_and_names_inside_messages_and_f_strings_but_not_docstrings():
    source = ('"""CRAWLMEM_ENABLED in a docstring."""\nx = {"CRAWLMEM_JSONL": 1}  # CRAWLMEM_GC_FREEZE in a comment\n'
              'y = f"CRAWLMEM_BUDGET {x} is off"\nz = f"raise CRAWLMEM_DRAIN_TIMEOUT_SECONDS ({x} s)"\n')
    assert sorted(crawlmem_literals(source)) == ["CRAWLMEM_BUDGET", "CRAWLMEM_DRAIN_TIMEOUT_SECONDS", "CRAWLMEM_JSONL"]
    assert crawlmem_literals('os.environ.get("CRAWLMEM_CHROMIUM")\n') == []
