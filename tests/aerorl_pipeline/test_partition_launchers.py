"""The partition launchers of a distributed bench (``aerorl_pipeline.distributed_bench``) once its runs end."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from aerorl_pipeline.distributed_bench import kill_idle_launchers


def ignore_sigterm(n: int) -> int:
    """A launcher after its run: Dagster's handlers turn SIGTERM into a request, so it no longer kills."""
    signal.signal(signal.SIGTERM, lambda *_: None)
    return n


@pytest.mark.parametrize("killed", [0, 1])
def test_killing_the_idle_launchers_lets_the_pool_shut_down_after_one_died_holding_its_queue(killed):
    """An idle launcher waits for work holding the pool's queue lock; killed (an end kills the launchers whose run
    had not started), it never releases it, and the other launcher waits on it forever: the pool's own clean-up
    sends it SIGTERM, which a launcher that ran a Dagster run ignores, and then waits for it, and the bench with it
    (a chaos run's SIGTERMed bench hung so). Once every future is done, the idle launchers are killed: the pool
    shuts down. Either launcher may hold the lock, so each is the killed one in turn."""
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"))
    futures = [pool.submit(ignore_sigterm, n) for n in (1, 2)]
    assert [future.result(timeout=120) for future in futures] == [1, 2]
    deadline = time.monotonic() + 60
    while len(pool._processes) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = sorted(pool._processes)
    assert len(pids) == 2
    time.sleep(0.5)  # both idle: one in the queue's get holding its lock, the other waiting for it
    os.kill(pids[killed], signal.SIGKILL)
    kill_idle_launchers(pool)
    closed = threading.Thread(target=pool.shutdown, daemon=True)
    closed.start()
    closed.join(timeout=60)
    assert not closed.is_alive(), "the pool's shutdown waited on a launcher"
