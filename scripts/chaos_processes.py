"""The processes of a chaos run: `aerorl` commands started in a workdir of their own, killed by plan, restarted
with the same command until one start exits 0 (``scripts/chaos.py``).

A :class:`Supervised` command is one command line and every start (:class:`Life`) it took; each life's
descendants (the partition launchers and Celery workers a bench starts) are remembered while they live, so a
descendant that outlives its command, orphaned by a SIGKILL, is still found: the chaos run reports each one
and ends it at the end. A :class:`Kill` says which process dies, by which signal, and when: after a delay, or
once an event (a predicate over the workdir) is seen.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "scripts" / "isolated_aerorl.py"
WORKER_MARK = "celery"
"""What a Celery worker's command line holds (``aerorl_pipeline.celery_workers.worker_command``)."""


def command_line(workdir: Path, argv: list[str]) -> list[str]:
    """``aerorl *argv`` writing only under ``workdir`` (``scripts/isolated_aerorl.py``)."""
    return [sys.executable, str(LAUNCHER), "--workdir", str(workdir), "--", *argv]


def child_env() -> dict[str, str]:
    """This process's environment with this checkout first on ``PYTHONPATH`` (so the workers it starts see it)."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


@dataclass
class Life:
    """One start of a command: its process, when it started and ended, how, and each descendant seen."""

    popen: subprocess.Popen
    started: float  # time.monotonic()
    started_at: float = field(default_factory=time.time)  # the same moment as a date (what events compare)
    ended: float | None = None
    killed_by: str = ""  # "SIGKILL" / "SIGTERM" when the chaos run signalled it
    descendants: dict[int, psutil.Process] = field(default_factory=dict)

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def age(self, now: float) -> float:
        return now - self.started

    def note_descendants(self) -> None:
        """Remember every live descendant of the command (workers are reparented once it dies)."""
        try:
            for child in psutil.Process(self.popen.pid).children(recursive=True):
                self.descendants.setdefault(child.pid, child)
        except psutil.Error:
            pass

    def workers(self) -> list[psutil.Process]:
        """The live Celery workers this life started (each worker's main process: its pool's are its children)."""
        self.note_descendants()
        found = []
        for process in self.descendants.values():
            try:
                if (process.is_running() and process.ppid() == self.popen.pid
                        and WORKER_MARK in " ".join(process.cmdline())):
                    found.append(process)
            except psutil.Error:
                continue
        return found

    def survivors(self) -> list[psutil.Process]:
        """The descendants still running once the command has exited."""
        alive = []
        for process in self.descendants.values():
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(process)
            except psutil.Error:
                continue
        return alive


@dataclass(frozen=True)
class Kill:
    """A planned kill: ``target`` ("command", or "worker": one Celery worker of the command, the first found),
    ``signum``, and when: ``after_s`` seconds into the life, or once ``event(workdir, since)`` is true (``since``:
    the life's start, as a date: what an earlier start did is not this one's event)."""

    target: str
    signum: int
    after_s: float = 0.0
    event: Callable[[Path, float], bool] | None = None
    event_name: str = ""

    def due(self, life: Life, workdir: Path, now: float) -> bool:
        if self.event is not None:
            return self.event(workdir, life.started_at)
        return life.age(now) >= self.after_s

    def describe(self) -> str:
        when = self.event_name if self.event is not None else f"{self.after_s:.0f} s into its life"
        return f"{signal.Signals(self.signum).name} to the {self.target} ({when})"


@dataclass(frozen=True)
class KillRecord:
    """A kill that happened: which command, which process, how, at what age of the life."""

    command: str
    target: str
    pid: int
    signal_name: str
    age_s: float
    why: str


@dataclass
class Supervised:
    """One command of a chaos run, restarted until a start exits 0. ``kills(life_index)`` gives each start's
    planned kills, in order (a start may be killed more than once: its workers, then the command)."""

    name: str
    workdir: Path
    argv: list[str]
    logs: Path
    kills: Callable[[int], list[Kill]]
    lives: list[Life] = field(default_factory=list)
    records: list[KillRecord] = field(default_factory=list)
    finished: float | None = None
    _pending: list[Kill] = field(default_factory=list)

    def start(self, now: float) -> None:
        index = len(self.lives)
        log = self.logs / f"{self.name}-{index}"
        with open(log.with_suffix(".out"), "w") as out, open(log.with_suffix(".err"), "w") as err:
            popen = subprocess.Popen(command_line(self.workdir, self.argv), stdout=out, stderr=err,
                                     env=child_env(), cwd=ROOT)
        self.lives.append(Life(popen, now))
        self._pending = list(self.kills(index))

    @property
    def life(self) -> Life:
        return self.lives[-1]

    def tick(self, now: float) -> None:
        """Look at the command once: record its exit (restart it unless it exited 0), or kill by plan."""
        if self.finished is not None:
            return
        if not self.lives:
            self.start(now)
            return
        life = self.life
        life.note_descendants()
        if life.popen.poll() is not None:
            life.ended = life.ended or now
            if life.returncode == 0:
                self.finished = now
            else:
                self.start(now)
            return
        while self._pending and self._pending[0].due(life, self.workdir, now):
            self.fire(self._pending.pop(0), life, now)

    def fire(self, kill: Kill, life: Life, now: float) -> None:
        name = signal.Signals(kill.signum).name
        if kill.target == "worker":
            workers = life.workers()
            if not workers:
                return  # none running now: this kill is skipped
            victim = workers[0].pid
        else:
            victim = life.popen.pid
            life.killed_by = name
        try:
            os.kill(victim, kill.signum)
        except ProcessLookupError:
            return
        self.records.append(KillRecord(self.name, kill.target, victim, name, life.age(now), kill.describe()))

    def orphans(self) -> list[psutil.Process]:
        """Descendants of any start still running (call once the command has finished)."""
        return [process for life in self.lives for process in life.survivors()]

    def stop(self) -> None:
        """Kill whatever of this command still runs (the chaos run's end, or its time ran out)."""
        for life in self.lives:
            for process in [life.popen, *life.survivors()]:
                try:
                    process.kill()
                except (ProcessLookupError, psutil.Error):
                    continue
            life.popen.wait()


def run_until_finished(commands: list[Supervised], deadline: float, poll_s: float = 0.2) -> bool:
    """Tick every command until each has finished (True) or ``deadline`` passes (False)."""
    while time.monotonic() < deadline:
        now = time.monotonic()
        for command in commands:
            command.tick(now)
        if all(command.finished is not None for command in commands):
            return True
        time.sleep(poll_s)
    return False
