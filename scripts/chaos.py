"""A chaos run: `aerorl bench` (on Celery workers) and `aerorl train` killed at random and restarted with the same
command until each finishes, then compared with an undisturbed run of the same settings (issue 38, item 3).

    python scripts/chaos.py --workdir /tmp/chaos                     # one round, kills 10-60 s into each life
    python scripts/chaos.py --workdir /tmp/chaos --duration 1800     # rounds for 30 minutes
    python scripts/chaos.py --workdir /tmp/chaos --by-events --executor default   # the test's version

Everything is written under ``--workdir``: ``undisturbed/`` and ``disturbed/`` each hold a Dagster home, report
database, Parquet cache, checkpoints and a Celery folder broker (``scripts/isolated_aerorl.py``), ``models/`` the
embedded model both read, and ``logs/`` each start's output. The config (``chaos.toml``, written into each)
benchmarks a few easy-VQA questions on the embedded model at two batch sizes, on ``[executor] kind = "celery"``
(``aerorl bench`` starts two partition workers and the report writer) or ``"default"``, and trains a short run
(4 warm-up and 6 GRPO steps, a checkpoint every 2).

1. The undisturbed run: both commands once, side by side, no kill.
2. Rounds, each a new benchmark run id and training run name, both commands side by side. Each start is killed
   (SIGKILL or SIGTERM, drawn) once it has lived a time drawn from ``--kill-after`` (default 10-60 s), and a
   Celery bench's start may first lose one of its workers, at a time drawn the same way. A command that exits
   other than 0 is started again with the same command line; it has finished when a start exits 0. With
   ``--by-events`` the kills are the test's fixed few, each timed by what the command has done (a checkpoint
   written, a partition generating), so they land mid-work however fast the machine is.
3. After each round, what "nothing lost" means (``scripts/chaos_compare.py``): the round's rows equal the
   undisturbed run's, each generation and score once, no pool slot claimed and no run left STARTED in the
   disturbed instance, and no process of any start still running (an orphan is reported, then ended).

The figures printed at the end (kills, restarts, time lost against undisturbed, rows compared) are what
docs/measured.md records. Exit 0 when nothing was lost in any round, 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
sys.path[:0] = [str(SCRIPTS), str(SCRIPTS.parent)]  # its sibling modules, and this checkout

from chaos_compare import (  # noqa: E402
    InstanceLeftovers,
    TableCheck,
    compare_bench,
    compare_training,
    instance_leftovers,
)
from chaos_events import bench_generating, checkpoint_written  # noqa: E402
from chaos_processes import Kill, Supervised, run_until_finished  # noqa: E402

STEPS = (4, 6)  # supervised warm-up steps, RL steps
CONFIG = """
[benchmark]
batch_sizes = [1, 4]
seed = 0

[datasets.easy_vqa]
kind = "easy_vqa"
split = "test"
limit = {rows}
seed = 0

[models.tiny-qwen2-vl]
source = "{model}"

[generation]
max_new_tokens = 2

[rewards]
latency_budget_ms = 1e9  # the cost reward then measures no time: scores compare exactly

[training]
base_model = "tiny-qwen2-vl"
env = "easy_vqa"
train_limit = 64
eval_size = 16
warmup_steps = {warmup_steps}
steps = {steps}
warmup_batch_size = 4
prompts_per_step = 2
group_size = 2
max_new_tokens = 2
eval_interval = 3
checkpoint_interval = 2
sampled_eval_size = 0
control = false

[executor]
kind = "{executor}"
celery_dir = "{celery_dir}"
workers = 2

[storage]
cache_url = "{cache}"
"""


@dataclass(frozen=True)
class ChaosSettings:
    """What a chaos run does (the command line's flags)."""

    workdir: Path
    duration: float = 0.0  # start rounds until this many seconds have passed (0: one round)
    kill_after: tuple[float, float] = (10.0, 60.0)
    by_events: bool = False
    executor: str = "celery"
    seed: int = 0
    rows: int = 12
    round_limit: float = 1200.0


@dataclass(frozen=True)
class Side:
    """One workdir of the chaos run (``undisturbed`` or ``disturbed``) and its config file."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "chaos.toml"

    @property
    def database(self) -> Path:
        return self.root / "reports" / "aerorl.duckdb"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster_home"

    def prepare(self, model: Path, settings: ChaosSettings) -> Side:
        """Write the config: the embedded model at ``model``, the Parquet cache and the Celery folder broker
        here (named in the file: the workers, which `aerorl bench` starts, read them from it)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.config.write_text(CONFIG.format(rows=settings.rows, warmup_steps=STEPS[0], steps=STEPS[1], model=model,
                                             executor=settings.executor, celery_dir=self.root / "celery",
                                             cache=self.root / "data" / "cache"))
        return self

    def bench(self, name: str, run_id: str, kills: Callable[[int], list[Kill]], logs: Path) -> Supervised:
        return Supervised(name, self.root, ["bench", "--config", str(self.config), "--run-id", run_id], logs, kills)

    def train(self, name: str, run_name: str, kills: Callable[[int], list[Kill]], logs: Path) -> Supervised:
        return Supervised(name, self.root, ["train", "--config", str(self.config), "--run-name", run_name], logs,
                          kills)


def embedded_model(folder: Path) -> Path:
    """The embedded tiny model, built once under ``folder`` and shared by both sides (read only): a folder the
    config names, so the Celery workers load it from there too."""
    import aerorl_pipeline  # noqa: F401  (first: torch's OpenMP defaults for shared cores)
    from aerorl_ops.models.embedded_default import build_tiny_qwen2vl

    return build_tiny_qwen2vl(folder / "tiny-qwen2-vl")


@dataclass
class KillPlan:
    """Each start's kills (``Supervised.kills``): drawn from ``kill_after`` with ``rng``, or the test's fixed few."""

    kill_after: tuple[float, float]
    rng: random.Random
    by_events: bool = False
    workers: bool = True  # the bench runs on Celery workers, which are killed too

    def signal(self) -> int:
        return self.rng.choice((signal.SIGKILL, signal.SIGTERM))

    def drawn(self, workers: bool) -> list[Kill]:
        """A kill of the command at a drawn age; for a bench, first a worker's at another drawn age when earlier."""
        command = Kill("command", self.signal(), after_s=self.rng.uniform(*self.kill_after))
        if not workers:
            return [command]
        worker = Kill("worker", self.signal(), after_s=self.rng.uniform(*self.kill_after))
        return [worker, command] if worker.after_s < command.after_s else [command]

    def bench(self, run_id: str) -> Callable[[int], list[Kill]]:
        """Drawn kills, or: a worker's SIGKILL (Celery), then the command's SIGKILL, then its SIGTERM, each in a
        start of its own while a partition generates."""
        if not self.by_events:
            return lambda life: self.drawn(self.workers)
        generating = bench_generating(run_id)
        steps = [("worker", signal.SIGKILL)] if self.workers else []
        steps += [("command", signal.SIGKILL), ("command", signal.SIGTERM)]
        kills = [Kill(target, signum, event=generating, event_name="a partition generating")
                 for target, signum in steps]
        return lambda life: kills[life:life + 1]

    def train(self, run_name: str) -> Callable[[int], list[Kill]]:
        """Drawn kills, or: SIGKILL once checkpoint step-2 is written (mid-warm-up), then SIGTERM once step-6 is
        (mid-RL, 4 steps before the end)."""
        if not self.by_events:
            return lambda life: self.drawn(workers=False)
        fixed = [Kill("command", signum, event=checkpoint_written(run_name, step),
                      event_name=f"checkpoint step-{step} written")
                 for signum, step in ((signal.SIGKILL, 2), (signal.SIGTERM, 6))]
        return lambda life: fixed[life:life + 1]


@dataclass
class Round:
    """One disturbed round: its two commands and, once compared, its checks."""

    index: int
    bench: Supervised
    train: Supervised
    finished: bool = False
    checks: list[TableCheck] = field(default_factory=list)
    leftovers: InstanceLeftovers | None = None
    orphans: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.finished and all(check.ok for check in self.checks) and self.leftovers is not None
                and self.leftovers.ok and not self.orphans)


@dataclass
class ChaosRun:
    """A chaos run's undisturbed commands and its rounds."""

    reference: tuple[Supervised, Supervised]
    rounds: list[Round]

    @property
    def ok(self) -> bool:
        return all(chaos_round.ok for chaos_round in self.rounds)


def run_both(commands: list[Supervised], deadline: float) -> tuple[bool, list[str]]:
    """The commands side by side until each finished (or ``deadline``); whether they did, and the processes any
    start left running (each described, then ended)."""
    try:
        finished = run_until_finished(commands, deadline)
        return finished, [describe(process) for command in commands for process in command.orphans()]
    finally:
        for command in commands:
            command.stop()


def undisturbed(side: Side, logs: Path, deadline: float) -> tuple[Supervised, Supervised]:
    """Both commands once in ``side``, side by side, with no kill; each must exit 0 at its first start."""
    bench = side.bench("undisturbed-bench", "reference", lambda life: [], logs)
    train = side.train("undisturbed-train", "reference", lambda life: [], logs)
    finished, _ = run_both([bench, train], deadline)
    for command in (bench, train):
        if not finished or len(command.lives) != 1:
            raise SystemExit(f"chaos: the undisturbed {command.name} did not finish at its first start: see "
                             f"{logs / command.name}-0.err")
    return bench, train


def disturbed_round(index: int, side: Side, reference: Side, logs: Path, plan: KillPlan, deadline: float) -> Round:
    run_id, run_name = f"chaos-bench-{index}", f"chaos-train-{index}"
    chaos_round = Round(index, side.bench(f"round{index}-bench", run_id, plan.bench(run_id), logs),
                        side.train(f"round{index}-train", run_name, plan.train(run_name), logs))
    chaos_round.finished, chaos_round.orphans = run_both([chaos_round.bench, chaos_round.train], deadline)
    if chaos_round.finished:
        chaos_round.checks = (compare_bench(reference.database, side.database, run_id, "reference")
                              + compare_training(reference.database, side.database, run_name, "reference"))
    chaos_round.leftovers = instance_leftovers(side.dagster_home)
    return chaos_round


def describe(process) -> str:
    """A process in a few words: its id and the end of its command line."""
    try:
        return f"pid {process.pid} ({' '.join(process.cmdline()[-6:])})"
    except Exception:  # gone meanwhile (psutil.Error)
        return f"pid {process.pid}"


def run_chaos(settings: ChaosSettings, report_round: Callable[[ChaosRun], None] = lambda run: None) -> ChaosRun:
    """The undisturbed run, then rounds (module docstring); ``report_round`` is called after each."""
    workdir = settings.workdir.resolve()
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    model = embedded_model(workdir / "models")
    reference = Side(workdir / "undisturbed").prepare(model, settings)
    side = Side(workdir / "disturbed").prepare(model, settings)
    began = time.monotonic()
    plan = KillPlan(settings.kill_after, random.Random(settings.seed), settings.by_events,
                    settings.executor == "celery")
    run = ChaosRun(undisturbed(reference, logs, began + settings.round_limit), [])
    while not run.rounds or time.monotonic() - began < settings.duration:
        run.rounds.append(disturbed_round(len(run.rounds), side, reference, logs, plan,
                                          time.monotonic() + settings.round_limit))
        report_round(run)
    return run


def wall_s(command: Supervised) -> float:
    return command.finished - command.lives[0].started if command.finished is not None else float("nan")


def kills_line(command: Supervised) -> str:
    counts: dict[str, int] = {}
    for record in command.records:
        kind = f"{record.signal_name} to {record.target}"
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "no kill"


def round_lines(chaos_round: Round, reference: tuple[Supervised, Supervised]) -> list[str]:
    verdict = "nothing lost" if chaos_round.ok else ("SOMETHING LOST" if chaos_round.finished else "DID NOT FINISH")
    out = [f"round {chaos_round.index}: {verdict}"]
    for command, undisturbed_command in zip((chaos_round.bench, chaos_round.train), reference, strict=True):
        took = wall_s(command)
        out.append(f"  {command.name}: {len(command.lives)} starts (exit codes "
                   f"{[life.returncode for life in command.lives]}), {kills_line(command)}; {took:.0f} s, "
                   f"{took - wall_s(undisturbed_command):+.0f} s against undisturbed")
    out += [f"  {check.line()}" for check in chaos_round.checks]
    if chaos_round.leftovers is not None:
        out.append(f"  {chaos_round.leftovers.line()}")
    out.append(f"  processes left running by a start: {len(chaos_round.orphans)}"
               + (f" ({'; '.join(chaos_round.orphans)})" if chaos_round.orphans else ""))
    return out


def report(run: ChaosRun) -> str:
    """The chaos run's figures and verdicts, as text."""
    bench, train = (wall_s(command) for command in run.reference)
    rounds = run.rounds
    kills = sum(len(r.bench.records) + len(r.train.records) for r in rounds)
    restarts = sum(len(r.bench.lives) + len(r.train.lives) - 2 for r in rounds)
    rows = sum(check.found for r in rounds for check in r.checks)
    return "\n".join([f"undisturbed: bench {bench:.0f} s, train {train:.0f} s (side by side)",
                      *(line for r in rounds for line in round_lines(r, run.reference)),
                      f"in all: {len(rounds)} rounds, {kills} kills, {restarts} restarts, {rows} rows compared, "
                      f"{sum(r.ok for r in rounds)} of {len(rounds)} rounds with nothing lost"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True, help="everything is written under it")
    parser.add_argument("--duration", type=float, default=0.0,
                        help="start rounds until this many seconds have passed (0: one round)")
    parser.add_argument("--kill-after", type=float, nargs=2, default=(10.0, 60.0), metavar=("MIN_S", "MAX_S"))
    parser.add_argument("--by-events", action="store_true", help="the test's fixed kills, timed by events")
    parser.add_argument("--executor", choices=("celery", "default"), default="celery",
                        help="the bench's [executor] kind: celery (its workers are killed too) or default")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=12, help="easy-VQA questions benchmarked")
    parser.add_argument("--round-limit", type=float, default=1200.0, help="seconds a round may take at most")
    args = parser.parse_args(argv)
    settings = ChaosSettings(args.workdir, args.duration, tuple(args.kill_after), args.by_events, args.executor,
                             args.seed, args.rows, args.round_limit)
    run = run_chaos(settings, lambda run: print("\n".join(round_lines(run.rounds[-1], run.reference)), flush=True))
    print(report(run))
    return 0 if run.ok else 1


if __name__ == "__main__":
    sys.exit(main())
