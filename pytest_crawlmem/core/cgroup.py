"""The memory limit of this process's cgroup, from the texts of ``/proc/self/cgroup`` and its limit files (pure).

The crawl process reads the files (``governor/extension.py``); this module only parses what they say, so the
rules (v1 or v2, "no limit" spelled ``max`` or as a huge number) are tested without a cgroup.
"""

from __future__ import annotations

from dataclasses import dataclass

#: v1 spells "no limit" as the largest page-aligned signed 64-bit number; anything this large is no limit.
_NO_LIMIT_FLOOR = 2**60
#: ``CRAWLMEM_BUDGET = "auto"`` governs to this share of the cgroup's limit (the rest is the margin to the OOM killer).
AUTO_SHARE = 0.8


@dataclass(frozen=True)
class CgroupPaths:
    """Where this process's memory limit is written: the v2 unified path, or the v1 memory controller's."""

    v2: str | None  # path under the v2 mount ("/" for the root), None when there is no unified line
    v1_memory: str | None  # path under the v1 memory controller's mount, None when it is not mounted


def parse_proc_cgroup(text: str) -> CgroupPaths:
    """The memory cgroup paths of ``/proc/self/cgroup``: ``0::<path>`` (v2) and ``N:...memory...:<path>`` (v1)."""
    v2: str | None = None
    v1: str | None = None
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path or "/"
        elif "memory" in controllers.split(","):
            v1 = path or "/"
    return CgroupPaths(v2=v2, v1_memory=v1)


def parse_limit(text: str) -> int | None:
    """A limit file's bytes (``memory.max``, ``memory.limit_in_bytes``); None for ``max``, no limit or garbage."""
    value = text.strip()
    if not value or value == "max":
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return number if 0 < number < _NO_LIMIT_FLOOR else None


def limit_files(paths: CgroupPaths, *, root: str = "/sys/fs/cgroup") -> list[str]:
    """The limit files to read, innermost first: v2 ``memory.max``, then v1 ``memory.limit_in_bytes``.

    Inside a container the process's path is often ``/`` of a namespace, so the file at the mount's root is tried too.
    """
    files: list[str] = []
    if paths.v2 is not None:
        files.append(_join(root, paths.v2, "memory.max"))
        files.append(_join(root, "/", "memory.max"))
    if paths.v1_memory is not None:
        files.append(_join(root + "/memory", paths.v1_memory, "memory.limit_in_bytes"))
        files.append(_join(root + "/memory", "/", "memory.limit_in_bytes"))
    return list(dict.fromkeys(files))


def smallest_limit(texts: list[str | None]) -> int | None:
    """The tightest limit among the limit files' texts (None: a file that could not be read)."""
    limits = [limit for text in texts if text is not None if (limit := parse_limit(text)) is not None]
    return min(limits) if limits else None


def auto_budget(limit_bytes: int | None) -> int | None:
    """The budget ``"auto"`` stands for: 80% of the cgroup's limit, None when no limit is set."""
    return int(limit_bytes * AUTO_SHARE) if limit_bytes else None


def _join(root: str, path: str, name: str) -> str:
    inner = path.strip("/")
    return f"{root}/{inner}/{name}" if inner else f"{root}/{name}"
