"""The import rules, checked rather than stated: the pure core imports no pytest, Scrapy, Twisted, psutil or I/O."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_crawlmem"
FIXTURE_SITES = PACKAGE.parent / "fixture_sites"
#: The rooms, and which rooms each may import (its own always). The room graph has no cycle: the pure core at the bottom,
#: the crawl process's readings above it, attribution, the browser, the governor and replay above those, the measuring
#: extension above them, reports beside, and the pytest side (harness, the cluster fixture) on top.
MAY_IMPORT = {
    "core": set(),
    "probes": {"core"},
    "attribution": {"core", "probes"},
    "browser": {"core", "probes"},
    "governor": {"core", "probes", "browser"},
    "replay": {"core"},
    "measure": {"core", "probes", "attribution", "browser", "governor", "replay"},
    "reports": {"core", "governor"},
    "harness": {"core", "probes", "attribution", "browser", "governor", "replay", "measure", "reports"},
    "cluster": {"core", "probes", "measure", "reports", "harness"},
}
ROOMS = tuple(MAY_IMPORT)
#: Modules outside ``core`` that are pure too (they say so in their docstring): the governor's decisions, read by reports.
PURE_ELSEWHERE = {"governor/policy.py", "governor/pacing.py", "governor/context_policy.py",
                  "governor/browser_concurrency.py", "browser/jobverdict.py"}
#: The pytest side: the only modules that may import pytest.
PYTEST_SIDE = {"harness", "cluster/fixture.py", "cluster/run.py", "cluster/redisserver.py"}
#: What a pure module must not import: the test runner, the crawler, processes, threads, files and the network.
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


def modules(room: str) -> list[Path]:
    """The modules of one room."""
    return sorted((PACKAGE / room).glob("*.py"))


def room_module(path: Path) -> str:
    """``core/models.py`` for a module of the package."""
    return str(path.relative_to(PACKAGE))


def package_imports(path: Path, root: Path = PACKAGE) -> set[str]:
    """The package's modules a file imports (dotted, without the package name), wherever the import stands."""
    found = set()
    here = path.relative_to(root.parent).with_suffix("").parts
    package = here if here[-1] == "__init__" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or "" if not node.level else ".".join(
                [*package[: len(package) - node.level + 1], *([node.module] if node.module else [])])
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            if name.startswith("pytest_crawlmem."):
                dotted = name.removeprefix("pytest_crawlmem.")
                if (PACKAGE / (dotted.replace(".", "/") + ".py")).exists() or (PACKAGE / dotted.replace(".", "/")).is_dir():
                    found.add(dotted)
    found.discard(".".join(here[1:]))
    return found


def imports_of(path: Path, root: Path = PACKAGE) -> tuple[set[str], set[str], set[str]]:
    """Packages imported (anywhere in the file: lazy imports and ``if TYPE_CHECKING:`` ones too), rooms imported, I/O calls.

    An import for annotations only still ties a room to another (a type checker and a reader follow it): it counts.
    """
    external, io = set(), set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                external.update({alias.name, alias.name.split(".")[0]})
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                external.update({node.module, node.module.split(".")[0]})
        elif isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name in IO_CALLS:
                io.add(name)
    rooms = {dotted.split(".")[0] for dotted in package_imports(path, root)}
    return external, rooms, io


def is_pure(path: Path) -> bool:
    """Whether a module belongs to the pure side: the core, and the pure modules of other rooms."""
    return path.parent.name == "core" or room_module(path) in PURE_ELSEWHERE


def pure_modules() -> list[Path]:
    return [path for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts and is_pure(path)
            and path.name != "__init__.py"]


@pytest.mark.parametrize("path", pure_modules(), ids=room_module)
def test_a_pure_module_imports_no_pytest_scrapy_or_io(path):
    external, _, io = imports_of(path)
    assert not external & FORBIDDEN, f"{room_module(path)} imports {sorted(external & FORBIDDEN)}"
    assert not io, f"{room_module(path)} does file I/O: {sorted(io)}"
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert path.parent.name == "core" or "pure" in docstring, f"{room_module(path)} does not say it is pure"


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_the_rooms_below_it(room):
    for path in modules(room):
        _, rooms, _ = imports_of(path)
        allowed = MAY_IMPORT[room] | {room}
        if is_pure(path):
            allowed = {"core", room} & (MAY_IMPORT[room] | {room}) if room != "core" else {"core"}
        assert rooms <= allowed, f"{room_module(path)} imports {sorted(rooms - allowed)}"


def test_the_room_graph_has_no_cycle():
    order: list[str] = []
    pending = dict(MAY_IMPORT)
    while pending:
        ready = [room for room, below in pending.items() if below <= set(order)]
        assert ready, f"rooms that import each other: {sorted(pending)}"
        order += ready
        for room in ready:
            del pending[room]


def test_every_room_says_what_it_owns_and_may_import():
    for room in ROOMS:
        docstring = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text(encoding="utf-8"))) or ""
        assert "May import" in docstring or "may import" in docstring, f"{room}/__init__.py says nothing of its imports"


def test_no_two_modules_import_each_other():
    """Nor any longer cycle: a module can be read, changed and tested starting from those it imports."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        dotted = ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__")
        graph[dotted] = {name for name in package_imports(path) if (PACKAGE / (name.replace(".", "/") + ".py")).exists()}
    cycles = [(a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, set())]
    assert not cycles, f"modules that import each other: {cycles}"
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            assert state.get(target) != 1, f"an import cycle: {' -> '.join([*trail, node, target])}"
            if target not in state:
                visit(target, [*trail, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_no_module_is_over_800_lines():
    long = {room_module(path): n for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts
            and (n := len(path.read_text(encoding="utf-8").splitlines())) > 800}
    assert not long, f"split these by responsibility: {long}"


def test_only_the_pytest_side_imports_pytest():
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts or path.parent == PACKAGE:
            continue
        if path.parent.name in PYTEST_SIDE or room_module(path) in PYTEST_SIDE:
            continue
        external, _, _ = imports_of(path)
        assert not external & PYTEST, f"{room_module(path)} imports {sorted(external & PYTEST)}"


def test_every_module_lives_in_a_room_or_is_an_entry_point():
    """The top level holds only the package, the pytest entry point and the stable dotted paths users write."""
    top = {path.stem for path in PACKAGE.glob("*.py")}
    assert top == {"__init__", "__main__", "plugin", "extension", "middleware", "testing", "replay_scrapy",
                   "record", "docgen", "spidermon"}
    assert {path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"} == set(ROOMS)


def test_the_public_surface_imports_no_pytest_or_scrapy():
    """``import pytest_crawlmem`` (the CLI, an isolated child, a user's type hints) pulls in only the core."""
    imported = package_imports(PACKAGE / "__init__.py")
    assert imported and all(module.startswith("core.") for module in imported), imported
    assert not imports_of(PACKAGE / "__init__.py")[0] & FORBIDDEN


def test_the_stable_dotted_paths_are_the_classes_scrapy_loads():
    """What users write into EXTENSIONS, DOWNLOADER_MIDDLEWARES, ITEM_PIPELINES and DOWNLOAD_HANDLERS keeps loading."""
    import importlib

    from pytest_crawlmem.core.replay import COPIES_MIDDLEWARE_PATH, HANDLER_PATH
    from pytest_crawlmem.measure import extension, middleware, testing
    from pytest_crawlmem.measure.runner import EXTENSION_PATH
    from pytest_crawlmem.replay import handler as replay_scrapy

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
    """An ``if TYPE_CHECKING:`` import of a higher room ties the rooms like any other import."""
    module = tmp_path / "pytest_crawlmem" / "core" / "typed.py"
    module.parent.mkdir(parents=True)
    module.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                      "    from pytest_crawlmem.browser.job import BrowserJob\n    import scrapy\n")
    external, rooms, _ = imports_of(module, root=module.parent.parent)
    assert "browser" in rooms and "scrapy" in external


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


#: ``CRAWLMEM_`` names that are not Scrapy settings: an environment variable (browser/settings.py).
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
    imported = package_imports(PACKAGE / "core" / "defaults.py")
    assert not imported, f"core/defaults.py imports {sorted(imported)}: a module it imports could not import it (a cycle)"


def test_the_literal_check_sees_keys_and_names_inside_messages_and_f_strings_but_not_docstrings():
    source = ('"""CRAWLMEM_ENABLED in a docstring."""\nx = {"CRAWLMEM_JSONL": 1}  # CRAWLMEM_GC_FREEZE in a comment\n'
              'y = f"CRAWLMEM_BUDGET {x} is off"\nz = f"raise CRAWLMEM_DRAIN_TIMEOUT_SECONDS ({x} s)"\n')
    assert sorted(crawlmem_literals(source)) == ["CRAWLMEM_BUDGET", "CRAWLMEM_DRAIN_TIMEOUT_SECONDS", "CRAWLMEM_JSONL"]
    assert crawlmem_literals('os.environ.get("CRAWLMEM_CHROMIUM")\n') == []
