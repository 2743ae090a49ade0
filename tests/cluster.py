"""A test cluster: shared storage, one job database, one Redis broker and
``faceweave worker`` processes (each in its own process group, with its own
health and metrics port), for the distributed, fail-over and monitoring tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.servers import free_port
from tests.service_fixtures import settings, wait_for

WORKER = "import typer; from faceweave.cli.worker import worker_command; typer.run(worker_command)"
ROOT = Path(__file__).parents[1]


class Cluster:
    """Shared storage, a database, the Redis broker and worker processes."""

    def __init__(self, root: Path, database: str, broker: str, **more) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        values = dict(
            lease_s=3.0,
            sweep_interval_s=1.0,
            progress_interval_s=0.2,
            segment_frames=40,
            segments=4,
            max_attempts=3,
            watermark=False,
        )
        values.update(more)
        self.config = settings(root, database=database, broker=broker, **values)
        self.config_file = root / "settings.json"
        self.config_file.write_text(self.config.model_dump_json(exclude={"auth", "runtime"}))
        self.workers: dict[str, subprocess.Popen] = {}
        self.ports: dict[str, int] = {}

    def start_worker(self, name: str, *args: str, fault_after: int | None = None, **env_more: str) -> None:
        """Start worker ``name`` (``args``: more ``faceweave worker`` flags); with
        ``fault_after``, its device breaks after that many inferences (``tests.faulty_worker``)."""
        env = {**os.environ, "FACEWEAVE_CONFIG": "", **env_more}
        program = ["-c", WORKER]
        if fault_after is not None:
            env["FACEWEAVE_TEST_FAULT_AFTER"] = str(fault_after)
            program = ["-m", "tests.faulty_worker"]
        self.ports[name] = port = free_port()
        flags = ["--config", str(self.config_file), "--name", f"{name}@test", "--concurrency", "1"]
        flags += ["--pool", "prefork", "--log-level", "info", "--health-port", str(port), *args]
        with open(self.log_path(name), "ab") as log:  # the worker keeps its own copy of the descriptor
            self.workers[name] = subprocess.Popen(
                [sys.executable, *program, *flags],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=str(ROOT),
            )

    def log_path(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def log(self, name: str) -> str:
        return self.log_path(name).read_text(errors="replace")

    def wait_ready(self, name: str) -> None:
        def ready() -> bool:
            if self.workers[name].poll() is not None:
                raise AssertionError(f"worker {name} exited: {self.log(name)[-3000:]}")
            return "model slot(s) warmed up" in self.log(name)

        wait_for(ready, what=f"worker {name} to load its models", limit_s=180.0, every_s=0.2)

    def get(self, name: str, path: str) -> tuple[int, bytes]:
        """``GET path`` on worker ``name``'s health port: status and body."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[name]}{path}", timeout=10) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def health(self, name: str, path: str = "/healthz") -> tuple[int, dict]:
        status, body = self.get(name, path)
        return status, json.loads(body)

    def row(self, job_id: str):
        """The job's record as the store has it now."""
        from faceweave.service.store import JobStore

        store = JobStore(self.config.database_url)
        try:
            return store.get(job_id)
        finally:
            store.close()

    def kill(self, name: str) -> None:
        process = self.workers.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def stop(self, name: str) -> None:
        process = self.workers.pop(name)
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def terminate(self, name: str, limit_s: float = 120.0) -> int:
        """SIGTERM to the worker's main process only, as Kubernetes and ``podman stop``
        send it; returns its exit code once it has shut down."""
        process = self.workers.pop(name)
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(limit_s)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def close(self) -> None:
        for name in list(self.workers):
            self.kill(name)
