"""Real servers for the distributed tests: ``redis-server`` and PostgreSQL,
each started in a temporary folder on a free loopback port and stopped at
the end.  :func:`find_redis` / :func:`find_postgres` say why a test must be
skipped when the Debian packages (``redis-server``, ``postgresql``) are missing.

PostgreSQL refuses to run as root: as root, its data folder is given to the
``postgres`` user and ``initdb`` / ``postgres`` run through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_redis() -> tuple[str | None, str]:
    """``(path of redis-server, "")`` or ``(None, why not)``."""
    path = shutil.which("redis-server")
    if path is None and os.path.exists("/usr/bin/redis-server"):  # /usr/bin may be missing from PATH
        path = "/usr/bin/redis-server"
    return (path, "") if path else (None, "redis-server is not installed (Debian package redis-server)")


def find_postgres() -> tuple[Path | None, str]:
    """``(folder holding initdb and postgres, "")`` or ``(None, why not)``."""

    def version(folder: str) -> int:
        name = folder.split("/")[-2]
        return int(name) if name.isdigit() else 0

    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if os.path.exists(os.path.join(folder, "initdb")) and os.path.exists(os.path.join(folder, "postgres")):
            break
    else:
        which = shutil.which("initdb")
        if not which:
            return None, "PostgreSQL is not installed (Debian package postgresql)"
        folder = os.path.dirname(os.path.realpath(which))
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return None, "running as root without runuser: PostgreSQL cannot be started"
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no 'postgres' user to run PostgreSQL as"
    return Path(folder), ""


def _wait(check, what: str, process: subprocess.Popen, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} while starting")
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not answering yet, in whatever way: poll again
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start within {limit_s:.0f} s")
        time.sleep(0.1)


def _stop(process: subprocess.Popen, limit_s: float = 15.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(limit_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class Redis:
    url: str
    port: int
    process: subprocess.Popen


@contextmanager
def redis_server() -> Iterator[Redis]:
    """A fresh ``redis-server`` (no persistence) on a free port."""
    path, why = find_redis()
    if path is None:
        raise RuntimeError(why)
    import redis

    folder = tempfile.mkdtemp(prefix="faceweave-redis-")
    port = free_port()
    process = subprocess.Popen(
        [
            path,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            folder,
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
        _wait(client.ping, "redis-server", process)
        client.close()
        yield Redis(url=f"redis://127.0.0.1:{port}/0", port=port, process=process)
    finally:
        _stop(process)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class Postgres:
    url: str
    port: int
    process: subprocess.Popen


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A fresh PostgreSQL cluster (trust authentication, fsync off) on a free port."""
    folder, why = find_postgres()
    if folder is None:
        raise RuntimeError(why)
    root = Path(tempfile.mkdtemp(prefix="faceweave-pg-"))
    data, sockets = root / "data", root / "sock"
    sockets.mkdir()
    as_user: list[str] = []
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    process = None
    try:
        subprocess.run(
            [
                *as_user,
                str(folder / "initdb"),
                "-D",
                str(data),
                "-U",
                "faceweave",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        process = subprocess.Popen(
            [
                *as_user,
                str(folder / "postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-k",
                str(sockets),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"postgresql+psycopg://faceweave@127.0.0.1:{port}/postgres"

        def ready() -> bool:
            import psycopg

            with psycopg.connect(f"host=127.0.0.1 port={port} user=faceweave dbname=postgres", connect_timeout=2):
                return True

        _wait(ready, "postgres", process)
        yield Postgres(url=url, port=port, process=process)
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)


def new_database(server: Postgres, name: str) -> str:
    """Create database ``name`` on ``server``; its SQLAlchemy URL."""
    import psycopg

    with psycopg.connect(f"host=127.0.0.1 port={server.port} user=faceweave dbname=postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.url.rsplit("/", 1)[0] + f"/{name}"
