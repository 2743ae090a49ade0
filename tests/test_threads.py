"""The numerical libraries' thread limits: held while a frame-parallel
pipeline runs, given back as they were when the last one ends."""

from __future__ import annotations

import threading

import cv2
import numpy as np
from threadpoolctl import threadpool_info

from faceweave import threads
from faceweave.threads import LibraryThreads, frame_parallel_threads, photo_threads, single_threaded_blas


def _blas_threads() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_opencv_is_held_to_one_thread_until_the_last_holder_leaves() -> None:
    before = cv2.getNumThreads()
    cv2.setNumThreads(3)
    try:
        limits = LibraryThreads()
        first, second = limits.held(opencv=True), limits.held(opencv=True)
        first.__enter__()
        assert cv2.getNumThreads() == 1
        second.__enter__()
        first.__exit__(None, None, None)
        assert cv2.getNumThreads() == 1  # the second video still runs
        second.__exit__(None, None, None)
        assert cv2.getNumThreads() == 3
    finally:
        cv2.setNumThreads(before)


def test_a_photo_keeps_opencvs_pool_and_blas_is_given_back() -> None:
    before_cv, before_blas = cv2.getNumThreads(), _blas_threads()
    with single_threaded_blas():
        assert cv2.getNumThreads() == before_cv
        assert all(n == 1 for n in _blas_threads())
        with frame_parallel_threads():
            assert cv2.getNumThreads() == 1
        assert cv2.getNumThreads() == before_cv
        assert all(n == 1 for n in _blas_threads())  # the photo still holds BLAS
    assert cv2.getNumThreads() == before_cv
    assert _blas_threads() == before_blas


def test_a_photo_holds_opencv_to_one_thread_on_two_cores_and_keeps_the_pool_on_more(monkeypatch) -> None:
    before = cv2.getNumThreads()
    cv2.setNumThreads(4)
    try:
        monkeypatch.setattr(threads, "usable_cpus", lambda: 2)
        with photo_threads():
            assert cv2.getNumThreads() == 1
            assert all(n == 1 for n in _blas_threads())
        assert cv2.getNumThreads() == 4
        monkeypatch.setattr(threads, "usable_cpus", lambda: 16)
        with photo_threads():
            assert cv2.getNumThreads() == 4
            assert all(n == 1 for n in _blas_threads())
    finally:
        cv2.setNumThreads(before)


def test_the_usable_cpus_are_counted() -> None:
    assert 1 <= threads.usable_cpus() <= (threads.os.cpu_count() or 1)


def test_limits_are_given_back_when_the_body_raises() -> None:
    before = cv2.getNumThreads()
    limits = LibraryThreads()
    try:
        with limits.held(opencv=True):
            raise RuntimeError("the video failed")
    except RuntimeError:
        pass
    assert cv2.getNumThreads() == before


def test_holders_on_several_threads_leave_the_setting_as_it_was() -> None:
    before = cv2.getNumThreads()
    limits = LibraryThreads()
    inside, go = threading.Barrier(4), threading.Event()
    seen: list[int] = []

    def video() -> None:
        with limits.held(opencv=True):
            inside.wait(timeout=10)
            seen.append(cv2.getNumThreads())
            go.wait(timeout=10)

    workers = [threading.Thread(target=video) for _ in range(4)]
    for worker in workers:
        worker.start()
    go.set()
    for worker in workers:
        worker.join(timeout=10)
    assert seen == [1, 1, 1, 1]
    assert cv2.getNumThreads() == before


def test_opencv_on_one_thread_gives_the_same_pixels() -> None:
    """The limit changes how a call is split, never its result."""
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
    matrix = np.array([[0.9, 0.1, 20.0], [-0.1, 0.9, 40.0]])

    def work() -> tuple[np.ndarray, ...]:
        warped = cv2.warpAffine(frame, matrix, (1280, 720), flags=cv2.INTER_LINEAR)
        small = cv2.resize(frame, (640, 360), interpolation=cv2.INTER_AREA)
        blurred = cv2.GaussianBlur(frame.astype(np.float32), (0, 0), 3.0)
        lab = cv2.cvtColor(frame.astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)
        return warped, small, blurred, lab

    pooled = work()
    with frame_parallel_threads():
        single = work()
    for a, b in zip(pooled, single, strict=True):
        assert np.array_equal(a, b)
