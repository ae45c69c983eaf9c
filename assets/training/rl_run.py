"""``rl_run``: warm-up then RL of a policy on a task environment, against a frozen quantized reference.

The environment (``env``, default easy-VQA) supplies training items and a fixed held-out sample
(``eval_size`` items of ``eval_split``, seed 0). Each environment is read from its rows asset
(``assets.run_rows``: ``training/train_rows``, ``training/held_out_rows``, ``training/validation_rows``,
the asset's upstream) when that holds exactly what the run draws from its source now; a run config that
draws another sample, or rows missing or stale, read the source instead, with a warning. The
materialization says where each came from, with the content hash of its items. Per-step metrics,
evaluations (overall and per question type, with the no-image prior and the supervised control) and the
run land in DuckDB as they happen, with the rows the environments rejected; checkpoints under
``data/checkpoints/<run>``.
Rerunning the same config resumes from the newest complete checkpoint, keeping every stored row; a
finished run is not trained again (``rl.run.train_and_record``); ``resume=False`` starts the run over.
Every checkpoint of the run is then recorded: a ``checkpoints`` row in DuckDB and a materialization of its
``checkpoints`` partition ``<run_id>@<step>`` (``assets.checkpoints``).

With ``nproc_per_node`` x ``nnodes`` > 1 the run happens on that many torchrun ranks, launched through
Dagster Pipes (``assets.training.torchrun``): on this machine, or one Kubernetes pod per node
(``[training_launch]``); rank 0 then does what this step does in process: the library's
``rl.run.train_and_record.train_and_record``, reported back as this asset's materialization.
"""

import re
from datetime import UTC, datetime

import dagster as dg
from dagster_duckdb import DuckDBResource

from aerorl_ops.config.benchmark import BenchmarkConfig
from aerorl_ops.config.fields import ConfigError, checked
from aerorl_ops.config.training import TrainingSettings
from aerorl_ops.rl.record.checkpoint_rows import record_run_checkpoints
from aerorl_ops.rl.run.run_id import training_run_id
from aerorl_ops.rl.run.train_and_record import train_and_record
from aerorl_ops.storage.cost_views import create_cost_views
from assets.checkpoints import record_checkpoints
from assets.io_managers import ParquetTableIOManager
from assets.resources import ModelRuntime
from assets.run_rows import cached_tables, training_rows
from assets.settings_config import config_class, settings_values
from assets.training.run_parts import model_place, report_place, rows_extras, run_metadata, run_options
from assets.training.torchrun import launch_ranks

WHERE = "rl_run config"
SAFE_RUN_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")

TRAINING_DOC = """Training settings of this run; the defaults are the config file's [training].

base_model: a model key from the config file, or a checkpoint directory. env: the task
environment; the held-out sample is a fixed draw (seed 0) of eval_size items of eval_split, and
the training items are train_split (train_limit of them, 0 = all). steps: RL steps after
``warmup_steps`` supervised steps. quant_bits: reference as nf4 (4), int8 (8) or unquantized (16)."""
RUN_FIELDS = {
    "run_name": (str, "", "run id (default: derived from the settings; the same settings resume)"),
    "resume": (bool, True, "resume from this run's latest checkpoint when there is one"),
    "progress_bar": (bool, False, "show a progress bar on the terminal"),
    "wandb_project": (str, "", "also log to this wandb project when wandb is installed (empty = TensorBoard only)"),
    "wandb_mode": (str, "offline", "wandb mode: offline (default), online or disabled"),
}
"""Run-config fields of ``rl_run`` that are not settings: they name or show a run, not what it trains."""


class TrainingRunConfig(dg.Config):
    """What ``rl_run``'s run config does with its fields (generated per config file by
    :func:`training_config_class`)."""

    def settings(self) -> TrainingSettings:
        """The run's ``TrainingSettings``, every one checked as in the file, then the rules across them:
        a ``ConfigError`` names the setting. The run fields (``RUN_FIELDS``) are not settings."""
        if self.run_name and not SAFE_RUN_NAME.match(self.run_name):
            raise ConfigError(f"{WHERE} run_name {self.run_name!r} must be letters, digits, '.', '_' or '-' "
                              "(at most 100, not starting with '.'): it names a folder under data/checkpoints")
        return checked(TrainingSettings, WHERE, "training", settings_values(self, TrainingSettings),
                       named=str).check_rules(WHERE)

    def run_id(self) -> str:
        """``run_name`` when set, else a stable id of the settings (``rl.run.run_id.training_run_id``)."""
        settings = TrainingSettings(**settings_values(self, TrainingSettings))
        return training_run_id(settings, settings.resolve(), self.run_name)


def training_config_class(training: TrainingSettings) -> type[TrainingRunConfig]:
    """``rl_run`` run config: the ``[training]`` settings (defaults: ``training``), then ``RUN_FIELDS``."""
    return config_class("TrainingConfig", training, TRAINING_DOC, base=TrainingRunConfig, extra=RUN_FIELDS)


def build_rl_run(bench: BenchmarkConfig) -> dg.AssetsDefinition:
    """The ``rl_run`` asset; its run config defaults to the training settings in ``bench``."""
    TrainingConfig = training_config_class(bench.training)  # a Config class, made per config file

    rows = {stage: run_rows.key for stage, run_rows in training_rows(bench).items()}  # its environments' rows

    @dg.asset(group_name="training", kinds={"pytorch", "duckdb"}, deps=list(rows.values()))
    def rl_run(context: dg.AssetExecutionContext, config: TrainingConfig, model_runtime: ModelRuntime,
               duckdb: DuckDBResource, io_manager: dg.ResourceParam[ParquetTableIOManager]) -> dg.MaterializeResult:
        """Supervised warm-up, then RL against a frozen quantized reference; metrics to DuckDB."""
        settings = config.settings()  # every setting checked before any rank starts or model loads
        place = report_place(duckdb, model_runtime)
        if settings.on_ranks:
            result = launch_ranks(context, bench, settings, run_options(config.model_dump()), model_runtime, duckdb,
                                  rows_extras(io_manager, rows))
        else:
            run = train_and_record(bench, settings, run_options(config.model_dump()), model_place(model_runtime),
                                   place, context.log, cached=cached_tables(io_manager, rows))
            result = dg.MaterializeResult(metadata=run_metadata(run, duckdb))
        record_checkpoints(context, record_run_checkpoints(place.connect, place.checkpoints_dir, config.run_id(),
                                                           settings.base_model, datetime.now(UTC)))
        with duckdb.get_connection() as conn:
            create_cost_views(conn, bench.costs)
        return result

    return rl_run
