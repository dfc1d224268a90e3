"""Plugin-wide settings resolved once from the command line and the ini file (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_crawlmem.core.budgets import SPECS, BudgetError, parse_budget
from pytest_crawlmem.core.tolerances import DEFAULT_TOLERANCES, parse_compare_fail
from pytest_crawlmem.core.units import UnitError, parse_count, parse_seconds


@dataclass(frozen=True)
class Option:
    """A plugin option: ``--crawlmem-NAME`` on the command line and ``crawlmem_NAME`` in the ini file."""

    name: str
    help: str
    default: str | None
    metavar: str
    switch: bool = False  # a flag without a value (the ini key takes true/false)

    @property
    def dest(self) -> str:
        """The option's dest, also its ini key."""
        return "crawlmem_" + self.name.replace("-", "_")

    @property
    def flag(self) -> str:
        """The command-line flag."""
        return "--crawlmem-" + self.name


OPTIONS = (
    Option("report-dir", "directory for per-test reports (default: .crawlmem under the rootdir)", None, "DIR"),
    Option("interval", "seconds between samples of RSS and the engine's queues (default: 0.1)", "0.1", "SECONDS"),
    Option(
        "tracemalloc-frames",
        "trace Python allocations with this many frames during crawls; 0 traces only when a"
        " traced_peak budget asks for it (default: 0)",
        "0",
        "N",
    ),
    Option("isolate", "run every crawl in a fresh process, as crawl(..., isolate=True) does (ini: true/false)",
           None, "", switch=True),
    Option(
        "project-settings",
        "start crawls from the Scrapy project's settings, as scrapy crawl does (SCRAPY_SETTINGS_MODULE, else the"
        " scrapy.cfg nearest the test file or the working directory): true, false, or a settings module (default: true)",
        "true",
        "true|false|MODULE",
    ),
    Option("save", "append every crawl's figures to the baseline NAME (<baseline dir>/<machine>/NAME.json)",
           None, "NAME"),
    Option("compare", "compare every crawl to the baseline NAME (or a path to a baseline file); a regression fails the test",
           None, "NAME"),
    Option("baseline-dir", "directory of the baselines, one folder per machine inside (default: <report dir>/baselines);"
           " keep it between CI jobs: a CI cache, or a folder you commit", None, "DIR"),
    Option("compare-fail", f"tolerances of --crawlmem-compare, FIGURE:PERCENT% or FIGURE:AMOUNT, comma-separated"
           f" (default: {DEFAULT_TOLERANCES})", None, "TOLERANCES"),
    Option("fail-on", "what fails a test compared with --crawlmem-compare, comma-separated: regressions (a figure beyond"
           " its tolerance), new-leaks (a leak whose fingerprint is in no run of the baseline; a leak it has only warns)",
           "regressions", "regressions|new-leaks"),
)

#: What ``--crawlmem-fail-on`` may name.
FAIL_ON = ("regressions", "new-leaks")


@dataclass(frozen=True)
class PluginSettings:
    """Options resolved with their precedence (command line > ini > default) and validated."""

    report_dir: Path
    interval_seconds: float
    tracemalloc_frames: int
    budget_defaults: Mapping[str, object] = field(default_factory=dict)
    save_name: str | None = None
    compare_name: str | None = None
    compare_fail: str = DEFAULT_TOLERANCES
    isolate: bool = False
    project_settings: str = "true"  # "true" (look the project up), "false", or a settings module
    baseline_dir: Path | None = None  # --crawlmem-baseline-dir; None: <report dir>/baselines
    fail_on: frozenset[str] = frozenset({"regressions"})  # --crawlmem-fail-on: what a comparison fails a test for

    @property
    def baselines(self) -> Path:
        """Where baselines live: ``--crawlmem-baseline-dir``, else ``<report dir>/baselines``."""
        return self.baseline_dir if self.baseline_dir is not None else self.report_dir / "baselines"


def resolve_settings(
    get_cli: Callable[[str], object],
    get_ini: Callable[[str], object],
    rootdir: Path,
) -> PluginSettings:
    """Resolve every option and ini budget; raise ValueError naming the bad value and its source."""

    def value(option: Option) -> tuple[object, str]:
        cli = get_cli(option.dest)
        if cli is not None:
            return cli, f"command line {option.flag}"
        ini = get_ini(option.dest)
        if ini not in (None, "", []):
            return ini, f"ini {option.dest}"
        return option.default, f"default {option.dest}"

    by_name = {o.name: o for o in OPTIONS}
    report_dir, _ = value(by_name["report-dir"])
    interval, source = value(by_name["interval"])
    try:
        interval_seconds = parse_seconds(_number(interval), source=source)
        frames_value, frames_source = value(by_name["tracemalloc-frames"])
        frames = parse_count(frames_value, source=frames_source)
    except UnitError as exc:
        raise ValueError(str(exc)) from exc
    if frames > 100:
        raise ValueError(f"invalid tracemalloc-frames {frames} from {frames_source}: expected 0 to 100")
    tolerances, tolerances_source = value(by_name["compare-fail"])
    try:
        compare_fail = DEFAULT_TOLERANCES if tolerances is None else parse_compare_fail(tolerances, source=tolerances_source)
    except UnitError as exc:
        raise ValueError(str(exc)) from exc
    return PluginSettings(
        report_dir=Path(str(report_dir)) if report_dir else rootdir / ".crawlmem",
        interval_seconds=interval_seconds,
        tracemalloc_frames=frames,
        budget_defaults=ini_budgets(get_ini),
        save_name=_name(value(by_name["save"])[0]),
        compare_name=_name(value(by_name["compare"])[0]),
        compare_fail=compare_fail,
        isolate=_switch(*value(by_name["isolate"])),
        project_settings=_project_choice(*value(by_name["project-settings"])),
        baseline_dir=_directory(value(by_name["baseline-dir"])[0]),
        fail_on=parse_fail_on(*value(by_name["fail-on"])),
    )


def parse_fail_on(value: object, source: str) -> frozenset[str]:
    """``regressions``, ``new-leaks`` or both, comma-separated; anything else is an error naming its source."""
    names = frozenset(part.strip().lower() for part in str(value).split(",") if part.strip())
    unknown = sorted(names - set(FAIL_ON))
    if unknown or not names:
        raise ValueError(f"invalid fail-on {value!r} from {source}: expected {' or '.join(FAIL_ON)}, comma-separated")
    return names


def _directory(value: object) -> Path | None:
    """A directory option's path (``None`` when unset)."""
    return Path(str(value)).expanduser() if value not in (None, "") else None


def _project_choice(value: object, source: str) -> str:
    """``true``, ``false`` or a dotted settings module name; anything else is an error naming its source."""
    text = str(value).strip()
    if text.lower() in ("1", "true", "yes", "on", "auto"):
        return "true"
    if text.lower() in ("", "0", "false", "no", "off", "none"):
        return "false"
    if all(part.isidentifier() for part in text.split(".")):
        return text
    raise ValueError(
        f"invalid value {value!r} from {source}: expected true, false or a settings module such as myproject.settings"
    )


def _switch(value: object, source: str) -> bool:
    """A true/false option value; anything else is an error naming its source."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"invalid value {value!r} from {source}: expected true or false")


def _name(value: object) -> str | None:
    return str(value).strip() or None if value is not None else None


def _number(value: object) -> object:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def ini_budgets(get_ini: Callable[[str], object]) -> dict[str, object]:
    """Parse the ``crawlmem_<budget>`` ini defaults that are set."""
    parsed: dict[str, object] = {}
    for name, spec in SPECS.items():
        if not spec.enforced or f"crawlmem_{name}" in {o.dest for o in OPTIONS}:
            continue  # crawlmem_compare_fail is the --crawlmem-compare-fail option's ini key
        raw = get_ini(f"crawlmem_{name}")
        if raw in (None, "", []):
            continue
        value: object = raw
        if spec.parse is parse_seconds:
            value = _number(raw)
        try:
            parsed[name] = parse_budget(name, value, source=f"ini crawlmem_{name}")
        except BudgetError as exc:
            raise ValueError(str(exc)) from exc
    return parsed
