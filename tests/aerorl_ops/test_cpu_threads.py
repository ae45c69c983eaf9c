"""``configure_cpu_threads``: OpenMP's defaults for shared cores, set only where the user set nothing."""

from __future__ import annotations

import os
import sys
import types

import pytest

from aerorl_ops.cpu_threads import CpuThreads, available_cpus, configure_cpu_threads


def test_unset_variables_get_passive_and_the_cpu_count():
    environ = {"PATH": "/bin"}
    assert configure_cpu_threads(environ, cpus=3) == CpuThreads("PASSIVE", "3", ("OMP_WAIT_POLICY", "OMP_NUM_THREADS"))
    assert environ == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "3"}


def test_a_users_values_are_kept():
    environ = {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "5"}
    assert configure_cpu_threads(environ, cpus=3) == CpuThreads("ACTIVE", "5", ())
    assert environ == {"OMP_WAIT_POLICY": "ACTIVE", "OMP_NUM_THREADS": "5"}


def test_an_empty_value_counts_as_unset():
    environ = {"OMP_WAIT_POLICY": "", "OMP_NUM_THREADS": "1"}
    assert configure_cpu_threads(environ, cpus=3) == CpuThreads("PASSIVE", "1", ("OMP_WAIT_POLICY",))


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform")
def test_the_default_count_is_the_cpus_this_process_may_use():
    assert available_cpus() == len(os.sched_getaffinity(0))
    assert configure_cpu_threads({}).num_threads == str(len(os.sched_getaffinity(0)))


class FakeTorch(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("torch")
        self.threads: list[int] = []

    def set_num_threads(self, threads: int) -> None:
        self.threads.append(threads)


def test_an_already_loaded_torch_is_sized_only_for_this_process_environment(monkeypatch):
    torch = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    configure_cpu_threads({}, cpus=3)
    assert torch.threads == []  # a plain dict describes some other process
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    configure_cpu_threads(cpus=3)
    assert (torch.threads, os.environ["OMP_NUM_THREADS"]) == ([3], "3")
    configure_cpu_threads(cpus=4)  # now set: kept, and torch left alone
    assert (torch.threads, os.environ["OMP_NUM_THREADS"]) == ([3], "3")


def test_ranks_launched_together_split_the_cpus_unless_the_user_chose_a_count():
    from aerorl_ops.cpu_threads import threads_per_process

    assert threads_per_process(2, {"OMP_NUM_THREADS": "8"}, cpus=8) == {"OMP_NUM_THREADS": "4"}
    assert threads_per_process(3, {}, cpus=2) == {"OMP_NUM_THREADS": "1"}  # never 0
    assert threads_per_process(2, {"OMP_NUM_THREADS": "3"}, cpus=8) == {"OMP_NUM_THREADS": "3"}
