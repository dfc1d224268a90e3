"""The GitHub Actions workflow of docs/ci.md, run: its shell steps (``run:``, with their ``if:``) in a folder with a tiny
crawl test, as a push to main, then as pull requests, the ``uses:`` steps played by the test (the cache, the upload).

Nothing is installed (the ``pip install`` step is skipped: this environment has the plugin) and no network is used.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from spiders_source import SPIDERS

DOC = Path(__file__).resolve().parents[1] / "docs" / "ci.md"
SMALL = '''
import pytest
from spiders import *


@pytest.mark.crawl_memory(leak="warn")
def test_catalog(crawl, fixture_site):
    crawl(Catalog, start_urls=[fixture_site.url("/catalog/?pages=2&per_page=20")])
'''
LEAKY = SMALL + '''

@pytest.mark.crawl_memory(leak="warn")
def test_hoarder(crawl, fixture_site):
    crawl(Hoarder, start_urls=[fixture_site.url("/catalog/?pages=30&per_page=20")])
'''


def workflow() -> dict[str, Any]:
    """The YAML block after ``<!-- workflow: ... -->`` in docs/ci.md."""
    text = DOC.read_text()
    block = re.search(r"<!-- workflow: \.github/workflows/[\w.-]+\.yml -->\n```yaml\n(.*?)\n```", text, re.S)
    assert block, "docs/ci.md has no workflow block"
    return yaml.safe_load(block[1])  # type: ignore[no-any-return]


def condition(expression: str | None, *, event: str, ref: str, failed: bool) -> bool:
    """A step's ``if:`` as GitHub evaluates the forms the workflow uses (``success()`` when there is none)."""
    if expression is None:
        return not failed
    python = (expression.replace("&&", " and ").replace("||", " or ")
              .replace("github.event_name", repr(event)).replace("github.ref", repr(ref))
              .replace("always()", "True").replace("failure()", repr(failed)).replace("success()", repr(not failed)))
    assert re.fullmatch(r"[\s\w'/=!().-]*", python), f"an if: the test cannot evaluate: {expression}"
    value = eval(python, {"__builtins__": {}}, {})  # only literals, comparisons and booleans remain
    return bool(value) and ("always()" in expression or "failure()" in expression or not failed)


def run_job(directory: Path, cache: Path, *, event: str, ref: str) -> dict[str, int | str]:
    """Run the job's steps in ``directory`` as GitHub would for ``event``/``ref``; the step names with their exit status
    (``skipped``, or ``played`` for a ``uses:`` step the test stands in for)."""
    steps = workflow()["jobs"]["crawl-memory"]["steps"]
    summary = directory / "step-summary.md"
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_EVENT_NAME": event, "GITHUB_REF": ref,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTEST_ADDOPTS", None)
    failed, done = False, {}
    for step in steps:
        name = step.get("name") or step.get("uses")
        if not condition(step.get("if"), event=event, ref=ref, failed=failed):
            done[name] = "skipped"
            continue
        uses = step.get("uses", "")
        if uses.startswith("actions/cache/restore"):
            if (cache / "baselines").exists():
                shutil.copytree(cache / "baselines", directory / step["with"]["path"], dirs_exist_ok=True)
            done[name] = "played"
        elif uses.startswith("actions/cache/save"):
            shutil.copytree(directory / step["with"]["path"], cache / "baselines", dirs_exist_ok=True)
            done[name] = "played"
        elif uses.startswith("actions/upload-artifact"):
            assert (directory / step["with"]["path"]).is_dir(), f"nothing to upload at {step['with']['path']}"
            done[name] = "played"
        elif uses:
            done[name] = "played"  # checkout, setup-python: this folder and this interpreter
        elif step["run"].startswith("pip install"):
            done[name] = "skipped"
        else:
            status = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=directory, env=env, timeout=900).returncode
            done[name] = status
            failed = failed or status != 0
    return done


def test_the_workflow_runs_on_pull_requests_and_main_saves_compares_and_uploads():
    flow = workflow()
    triggers = flow[True] if True in flow else flow["on"]  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    steps = flow["jobs"]["crawl-memory"]["steps"]
    runs = " ".join(step.get("run", "") for step in steps)
    assert "--crawlmem-save main" in runs and "--crawlmem-compare main" in runs and "--new-leaks" in runs
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and uploads[0]["if"] == "always()" and uploads[0]["with"]["path"].rstrip("/") == ".crawlmem"


def test_the_workflows_shell_steps_save_on_main_and_fail_a_pull_request_only_on_a_new_leak(pytester: pytest.Pytester):
    cache = pytester.path / "ci-cache"
    project = pytester.mkdir("project")
    (project / "spiders.py").write_text(SPIDERS)
    (project / "test_crawl.py").write_text(SMALL)
    main = run_job(project, cache, event="push", ref="refs/heads/main")
    assert main["Save baselines (main)"] == 0 and main["Keep baselines"] == "played", main
    assert main["Compare with main (pull requests)"] == "skipped" and main["Upload reports"] == "played", main
    assert list(cache.glob("baselines/*/main.json")), "main saved no baseline into the cache"

    shutil.rmtree(project / ".crawlmem")
    shutil.rmtree(project / ".crawlmem-baselines")  # a pull request's job starts from the cache alone
    same = run_job(project, cache, event="pull_request", ref="refs/pull/7/merge")
    assert same["Compare with main (pull requests)"] == 0, same
    assert same["New leaks against main"] == 0 and same["Keep baselines"] == "skipped", same
    summary = (project / "step-summary.md").read_text()
    assert "## crawl memory" in summary and "| test_crawl.py::test_catalog |" in summary

    shutil.rmtree(project / ".crawlmem")
    (project / "test_crawl.py").write_text(LEAKY)
    leak = run_job(project, cache, event="pull_request", ref="refs/pull/8/merge")
    assert leak["Compare with main (pull requests)"] == 1, leak
    assert leak["New leaks against main"] == 1 and leak["Upload reports"] == "played", leak
    summary = (project / "step-summary.md").read_text()
    assert "crawl_memory baseline: new retained-objects leak" in summary
