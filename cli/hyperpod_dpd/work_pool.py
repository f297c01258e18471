"""A few tasks on daemon threads that stop together: on the first failure, or when the calling thread is
interrupted (Ctrl-C), the tasks not started never start."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any


def run_pool(tasks: list[Callable[[], Any]], workers: int, stop: threading.Event) -> list[Any]:
    """Run ``tasks`` on ``workers`` daemon threads; their results in order. The first failure (or an interrupt of
    the calling thread) sets ``stop`` and is raised; tasks not started then never start."""
    todo: queue.Queue[tuple[int, Callable[[], Any]]] = queue.Queue()
    for item in enumerate(tasks):
        todo.put(item)
    done: queue.Queue[tuple[int, Any, BaseException | None]] = queue.Queue()

    def work() -> None:
        while not stop.is_set():
            try:
                i, task = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((i, task(), None))
            except BaseException as exc:  # handed to the calling thread
                done.put((i, None, exc))

    for _ in range(min(workers, len(tasks))):
        threading.Thread(target=work, daemon=True).start()
    results: list[Any] = [None] * len(tasks)
    try:
        for _ in tasks:
            while True:
                try:
                    i, value, error = done.get(timeout=0.2)  # a timeout keeps the thread interruptible
                    break
                except queue.Empty:
                    continue
            if error is not None:
                raise error
            results[i] = value
    except BaseException:
        stop.set()
        raise
    return results
