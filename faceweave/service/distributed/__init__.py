"""Distributed mode: API nodes publish jobs to a Celery broker (Redis) and
``faceweave worker`` processes on other machines run them, sharing the job
store (PostgreSQL) and a storage folder (a NAS mount).

* :mod:`.celery_app`: the Celery app factory and its delivery settings;
* :mod:`.records`: claiming a named job, and the ``job_segments`` table;
* :mod:`.tasks`: the tasks (a job, a video segment, the join);
* :mod:`.runtime`: what one worker process owns (store, storage, models);
* :mod:`.dispatch`: the API node's publisher and sweeper;
* :mod:`.worker_main`: starting a worker programmatically.

Celery, kombu and redis are imported only when these are used.
"""
