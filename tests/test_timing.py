"""Stage timing: wall and CPU milliseconds under one name (faceweave.timing)."""

from __future__ import annotations

import time

from faceweave.timing import CPU_SUFFIX, cpu_times, timed, wall_times


def test_a_stage_records_its_wall_and_cpu_time_and_adds_up():
    timings: dict[str, float] = {}
    with timed(timings, "wait"):
        time.sleep(0.05)
    with timed(timings, "wait"):
        time.sleep(0.05)
    assert set(timings) == {"wait", "wait" + CPU_SUFFIX}
    assert timings["wait"] >= 100.0
    # sleeping is wall time, not the thread's CPU time
    assert 0.0 <= timings["wait" + CPU_SUFFIX] < timings["wait"] / 2


def test_busy_work_counts_as_cpu_time():
    timings: dict[str, float] = {}
    with timed(timings, "spin"):
        end = time.thread_time() + 0.03
        while time.thread_time() < end:
            pass
    assert timings["spin" + CPU_SUFFIX] >= 30.0


def test_a_failing_stage_is_still_timed():
    timings: dict[str, float] = {}
    try:
        with timed(timings, "boom"):
            raise RuntimeError("x")
    except RuntimeError:
        pass
    assert "boom" in timings and "boom" + CPU_SUFFIX in timings


def test_wall_and_cpu_entries_split_by_name():
    timings = {"blend": 5.0, "blend.cpu": 4.0, "decode": 2.0, "decode.cpu": 1.5}
    assert wall_times(timings) == {"blend": 5.0, "decode": 2.0}
    assert cpu_times(timings) == {"blend": 4.0, "decode": 1.5}
