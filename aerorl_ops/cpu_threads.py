"""OpenMP settings for torch on CPUs shared with other jobs, set once at a process's entry point.

OpenMP's default wait policy keeps idle threads spinning. On cores shared with other jobs a spinning
thread waits for one that was descheduled at every one of a small model's many small ops: a small
torch loop on 2 shared cores took 84-110 s by default and 1.3-1.9 s with ``OMP_WAIT_POLICY=PASSIVE``
(idle threads sleep). torch also sizes its thread pool to the machine's physical cores, not to the
CPUs this process may run on (a container's or ``taskset``'s share), which oversubscribes them.

OpenMP reads both variables once, when torch loads it, so :func:`configure_cpu_threads` must run
before anything imports torch. A value the user set is kept. This module imports nothing heavy.

>>> env = {"OMP_WAIT_POLICY": "ACTIVE"}
>>> configure_cpu_threads(env, cpus=2)
CpuThreads(wait_policy='ACTIVE', num_threads='2', changed=('OMP_NUM_THREADS',))
>>> env
{'OMP_WAIT_POLICY': 'ACTIVE', 'OMP_NUM_THREADS': '2'}
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
NUM_THREADS_ENV = "OMP_NUM_THREADS"
PASSIVE = "PASSIVE"


@dataclass(frozen=True)
class CpuThreads:
    """The OpenMP settings in effect after :func:`configure_cpu_threads`, and the variables it set
    (those the user had not)."""

    wait_policy: str
    num_threads: str
    changed: tuple[str, ...]


def available_cpus() -> int:
    """How many CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def configure_cpu_threads(environ: MutableMapping[str, str] = os.environ, cpus: int | None = None) -> CpuThreads:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` and ``OMP_NUM_THREADS`` to ``cpus`` (default: :func:`available_cpus`)
    in ``environ`` where they are unset or empty; a user's value is kept.

    Call it before torch is imported. Where torch is already loaded in this process (``environ`` is
    ``os.environ``), the thread count is applied with ``torch.set_num_threads`` too; the wait policy
    then takes effect only in child processes.
    """
    cpus = cpus or available_cpus()
    defaults = {WAIT_POLICY_ENV: PASSIVE, NUM_THREADS_ENV: str(cpus)}
    changed = tuple(name for name in defaults if not environ.get(name))
    for name in changed:
        environ[name] = defaults[name]
    torch = sys.modules.get("torch")
    if environ is os.environ and torch is not None and NUM_THREADS_ENV in changed:
        torch.set_num_threads(cpus)
    return CpuThreads(environ[WAIT_POLICY_ENV], environ[NUM_THREADS_ENV], changed)


def threads_per_process(processes: int, environ: Mapping[str, str] = os.environ,
                        cpus: int | None = None) -> dict[str, str]:
    """``OMP_NUM_THREADS`` for each of ``processes`` processes launched together on this machine (torchrun
    ranks): the CPUs split between them, where this process's count is the default (every CPU); a count
    the user chose is passed on as it is.

    >>> threads_per_process(2, {"OMP_NUM_THREADS": "8"}, cpus=8)
    {'OMP_NUM_THREADS': '4'}
    >>> threads_per_process(2, {"OMP_NUM_THREADS": "3"}, cpus=8)  # the user's choice
    {'OMP_NUM_THREADS': '3'}
    """
    cpus = cpus or available_cpus()
    current = environ.get(NUM_THREADS_ENV)
    if current and current != str(cpus):
        return {NUM_THREADS_ENV: current}
    return {NUM_THREADS_ENV: str(max(1, cpus // processes))}
