"""``faceweave worker``: run jobs from the Celery broker (distributed mode)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from faceweave.cli import console, preflight

_BrokerFlag = Annotated[
    str | None,
    typer.Option("--broker", metavar="URL", help="Celery broker, e.g. redis://HOST:6379/0 (also FACEWEAVE_BROKER)."),
]

_DatabaseFlag = Annotated[
    str | None,
    typer.Option(
        "--database",
        metavar="URL",
        help="Job store shared with the API nodes, e.g. postgresql+psycopg://USER:PASS@HOST/DB.",
    ),
]

_StorageFlag = Annotated[
    str | None,
    typer.Option(
        "--storage",
        metavar="DIR|URL",
        help="Storage shared with the API nodes: a folder (a NAS mount) or s3://BUCKET/PREFIX.",
    ),
]

_ConfigFlag = Annotated[
    Path | None,
    typer.Option("--config", metavar="FILE", help="Settings file, TOML or JSON (also FACEWEAVE_CONFIG)."),
]

_ConcurrencyFlag = Annotated[
    int,
    typer.Option(
        "--concurrency",
        "-c",
        metavar="N",
        min=1,
        max=64,
        help="Jobs run at once (processes, or threads with --pool threads); each has its own models.",
    ),
]

_PoolFlag = Annotated[str, typer.Option("--pool", "-P", metavar="POOL", help="prefork (default), threads or solo.")]

_ExecutionProviderFlag = Annotated[
    str | None,
    typer.Option(
        "--execution-provider", metavar="NAME", help="Where neural models run: cpu, cuda, cann, tensorrt, ..."
    ),
]

_DeviceIdFlag = Annotated[
    int | None, typer.Option("--device-id", metavar="N", min=0, help="Accelerator index (cuda:N, NPU N).")
]

_NameFlag = Annotated[
    str | None, typer.Option("--name", "-n", metavar="NAME", help="Worker name (default faceweave@<host>).")
]

_HealthPortFlag = Annotated[
    int,
    typer.Option(
        "--health-port",
        metavar="PORT",
        min=0,
        max=65535,
        help="HTTP /healthz, /readyz and /metrics, on the settings' host (default 8001; 0: none).",
    ),
]

_MaxIdleFlag = Annotated[
    str | None,
    typer.Option(
        "--max-idle",
        metavar="TIME",
        help="Exit cleanly (code 0) after this long without a job, e.g. 5m, 90s, 1h (scale to zero).",
    ),
]

_DeviceMonitorFlag = Annotated[
    str,
    typer.Option(
        "--device-monitor",
        metavar="KIND",
        help="Device metrics: auto (default), nvidia, ascend, cambricon, host or none.",
    ),
]

_LogLevelFlag = Annotated[str, typer.Option("--log-level", metavar="LEVEL", help="debug, info, warning, error.")]

_VerboseFlag = Annotated[bool, typer.Option("--verbose", "-v", help="Show library logs and tracebacks.")]


def worker_command(
    broker: _BrokerFlag = None,
    database: _DatabaseFlag = None,
    storage: _StorageFlag = None,
    config: _ConfigFlag = None,
    concurrency: _ConcurrencyFlag = 1,
    pool: _PoolFlag = "prefork",
    execution_provider: _ExecutionProviderFlag = None,
    device_id: _DeviceIdFlag = None,
    name: _NameFlag = None,
    health_port: _HealthPortFlag = 8001,
    max_idle: _MaxIdleFlag = None,
    device_monitor: _DeviceMonitorFlag = "auto",
    log_level: _LogLevelFlag = "info",
    verbose: _VerboseFlag = False,
) -> None:
    """Take jobs from the broker until stopped (SIGTERM or Ctrl-C: running photos are finished,
    running video work goes back to the queue) or idle for --max-idle.

    Models are loaded and warmed up once per worker process before it takes a job.
    Settings come from defaults < --config FILE < FACEWEAVE_* variables < these flags.
    """

    built: dict = {}

    def body(term: console.Terminal) -> int:
        overrides = {
            "broker": broker,
            "database": database,
            "storage": storage,
            "runtime.execution_provider": execution_provider,
            "runtime.device_id": device_id,
        }
        built["max_idle_s"] = parse_duration(max_idle, flag="--max-idle") if max_idle is not None else None
        _check_monitor(device_monitor)
        built["settings"] = _checked_settings(
            config, overrides, pool=pool, log_level=log_level, health_port=health_port
        )
        runtime = built["settings"].runtime
        device = (
            runtime.execution_provider
            if runtime.execution_provider == "cpu"
            else (f"{runtime.execution_provider}:{runtime.device_id}")
        )
        term.note(f"faceweave worker: {concurrency} x {pool} on {device}; storage {built['settings'].storage_url}")
        return console.EXIT_OK

    code = console.run(verbose, body)
    if code != console.EXIT_OK:
        raise typer.Exit(code)
    # the worker runs outside the quiet session so that its log reaches stderr
    import logging

    from faceweave.service.distributed.worker_main import run_worker

    console.quiet_native_logging_env()
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    code = run_worker(
        built["settings"],
        pool=pool,
        concurrency=concurrency,
        node=name,
        loglevel=log_level.upper(),
        health_port=health_port,
        max_idle_s=built["max_idle_s"],
        device_monitor=device_monitor,
    )
    raise typer.Exit(code)


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, *, flag: str) -> float:
    """Seconds in ``text``: a number with an optional unit s, m or h ("5m", "90s", "300", "1.5h").

    Raises:
        InvalidOptionError: not such a duration, or not above zero.
    """
    from faceweave.errors import InvalidOptionError

    value = text.strip().lower()
    unit = value[-1:] if value[-1:] in ("s", "m", "h") else ""
    try:
        seconds = float(value[: len(value) - len(unit)]) * _UNITS[unit]
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise InvalidOptionError(f"{flag} must be a time above zero such as 5m, 90s or 1h; got {text!r}")
    return seconds


def _check_monitor(kind: str) -> None:
    from faceweave.errors import InvalidOptionError

    kinds = ("auto", "nvidia", "ascend", "cambricon", "host", "none")
    if kind not in kinds:
        raise InvalidOptionError(f"--device-monitor must be one of {', '.join(kinds)}; got {kind!r}")


def _checked_settings(config, overrides: dict, *, pool: str, log_level: str, health_port: int = 0):
    """The worker's settings, its flags checked, and the storage, database and
    broker reached once now (a bad one is one clear line, not a retry loop)."""
    from faceweave.errors import InvalidOptionError
    from faceweave.service.settings import load_settings

    settings = load_settings(config, overrides=overrides)
    if not settings.broker:
        raise InvalidOptionError("a worker needs a broker: --broker redis://HOST:6379/0 (or FACEWEAVE_BROKER)")
    preflight.check_distributed_installed(settings.broker, role="faceweave worker")
    from faceweave.service.distributed.worker_main import POOLS

    if pool not in POOLS:
        raise InvalidOptionError(f"--pool must be one of {', '.join(POOLS)}; got {pool!r}")
    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise InvalidOptionError(f"--log-level must be debug, info, warning or error; got {log_level!r}")
    if health_port:
        preflight.check_port_free(settings.host, health_port, flag="--health-port")
    preflight.check_device(settings.runtime)
    preflight.check_storage(settings.storage)
    preflight.check_object_storage(settings.s3)
    preflight.check_database(settings.database_url)
    preflight.check_broker(settings.broker)
    return settings
