"""The Celery app, built from the settings by :func:`make_celery` (no module-level app).

The API node's app only publishes (tasks are sent by name); a worker's app
also has the tasks registered on it, bound to the worker's
:class:`~faceweave.service.distributed.tasks.WorkerRuntime`.

Delivery settings, and why:

* ``task_acks_late`` + ``worker_prefetch_multiplier=1`` +
  ``task_reject_on_worker_lost``: a task is acknowledged only after it
  returns, each worker process holds at most one message, and a message whose
  worker process died goes back to the queue.
* the Redis ``visibility_timeout`` is the job lease: a message not
  acknowledged within a lease is delivered again.  That can hand a long
  task's message to a second worker while the first still runs it; the job
  store's conditional claim makes the second one a no-op, and the API node's
  sweeper re-publishes a job whose lease ran out, so nothing depends on the
  broker keeping a message.
"""

from __future__ import annotations

from typing import Any

from faceweave.service.settings import ServiceSettings

#: the broker queue all faceweave tasks go through
QUEUE = "faceweave"
TASK_JOB = "faceweave.run_job"
TASK_SEGMENT = "faceweave.run_segment"
TASK_JOIN = "faceweave.join_segments"


def celery_config(settings: ServiceSettings) -> dict[str, Any]:
    """The Celery configuration for ``settings`` (plain values)."""
    if not settings.broker:
        raise ValueError("celery_config needs settings.broker")
    visibility = max(1, round(settings.lease_s))
    return {
        "broker_url": settings.broker,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"visibility_timeout": visibility},
        "task_default_queue": QUEUE,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "result_backend": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
        # loading and warming the models in a new worker process takes longer than Celery's 4 s default
        "worker_proc_alive_timeout": 300.0,
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        # on: a worker whose device failed cancels its own consumer (``cancel_consumer``)
        "worker_enable_remote_control": True,
        "worker_send_task_events": False,
    }


def make_celery(settings: ServiceSettings, *, name: str = "faceweave"):
    """A new :class:`celery.Celery` app for ``settings.broker`` (no tasks registered)."""
    from celery import Celery

    app = Celery(name, set_as_current=False)
    app.conf.update(celery_config(settings))
    return app
