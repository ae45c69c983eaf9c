"""A command started through ``aerorl_pipeline.parent_bound`` dies with the process that started it, SIGKILL
included: what keeps a killed `aerorl bench`'s Celery workers and partition launchers from running on."""

from __future__ import annotations

import doctest
import subprocess
import sys
import time

import psutil
import pytest

import aerorl_pipeline.parent_bound as parent_bound

PARENT = """
import os, subprocess, sys, time
from aerorl_pipeline.parent_bound import bound_command
child = subprocess.Popen(bound_command(os.getpid(), ["sleep", "600"]), start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def test_the_docstring_examples_hold():
    result = doctest.testmod(parent_bound)
    assert result.attempted > 0 and result.failed == 0


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_bound_command_dies_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 60
        while psutil.Process(child).cmdline()[:1] != ["sleep"]:  # the bound command has replaced the launcher
            assert time.monotonic() < deadline, "the bound command did not start"
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(child)  # its own session, a SIGKILLed parent: only the kernel's request ended it
    finally:
        parent.kill()
