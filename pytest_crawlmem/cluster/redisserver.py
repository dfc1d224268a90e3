"""A private ``redis-server`` for one cluster: a Unix socket in a temp dir, no TCP, no persistence (pytest process)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: redis-server options: no TCP port, no RDB snapshots, no AOF, no protected-mode surprises.
SERVER_OPTIONS = ("--port", "0", "--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
                  "--databases", "1", "--loglevel", "warning")
START_TIMEOUT_SECONDS = 10.0


class RedisStartError(RuntimeError):
    """redis-server is missing, or did not answer on its socket in time."""


@dataclass
class RedisServer:
    """A running private redis-server: its socket, process and directory."""

    socket_path: Path
    process: subprocess.Popen[bytes]
    directory: Path
    _client: Any = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The ``REDIS_URL`` workers connect with (``unix:///...``)."""
        return f"unix://{self.socket_path}"

    def client(self) -> Any:
        """A redis-py client for this server (bytes replies), made once."""
        if self._client is None:
            import redis

            self._client = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=10)
        return self._client

    def stderr_tail(self) -> str:
        """What the server wrote to its log, last lines (for error messages)."""
        log = self.directory / "redis.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-5:]) if log.exists() else ""

    def close(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its directory."""
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        shutil.rmtree(self.directory, ignore_errors=True)


#: A Unix socket's path must be shorter than this (sun_path is 108 bytes with its terminating NUL on Linux).
SOCKET_PATH_MAX = 108


def start_redis(executable: str | None = None, timeout_seconds: float = START_TIMEOUT_SECONDS) -> RedisServer:
    """Start a private redis-server on a Unix socket in a new temp dir; return once it answers PING."""
    binary = executable or shutil.which("redis-server")
    if binary is None:
        raise RedisStartError("redis-server is not installed (Debian: apt-get install redis-server); crawl_cluster needs it")
    directory = Path(tempfile.mkdtemp(prefix="crawlmem-redis-"))
    if len(str(directory / "redis.sock")) >= SOCKET_PATH_MAX:  # a long TMPDIR: Redis refuses the socket ("too long")
        directory.rmdir()
        directory = Path(tempfile.mkdtemp(prefix="crawlmem-redis-", dir="/tmp"))
    socket_path = directory / "redis.sock"
    command = [binary, *SERVER_OPTIONS, "--dir", str(directory), "--unixsocket", str(socket_path),
               "--unixsocketperm", "700", "--logfile", str(directory / "redis.log")]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer(socket_path, process, directory)
    deadline = time.monotonic() + timeout_seconds
    while True:
        code = process.poll()
        if code is not None:
            tail = server.stderr_tail()
            server.close()
            raise RedisStartError(f"redis-server exited with code {code} at start: {tail or 'no log'}")
        if socket_path.exists():
            with contextlib.suppress(Exception):
                if server.client().ping():
                    return server
        if time.monotonic() > deadline:
            server.close()
            raise RedisStartError(f"redis-server did not answer on {socket_path} within {timeout_seconds:g} s")
        time.sleep(0.02)
