"""Compare the DuckDB tables of two `aerorl bench` runs, timings aside.

Used to check that a refactor changed no behaviour: run `aerorl bench --run-id A` on the old
code and `aerorl bench --run-id B` on the new code, then

    python scripts/compare_bench_reports.py OLD.duckdb A NEW.duckdb B

It compares, for every table the benchmark writes, the column names and types, and the rows of
the given run with the columns that measure time or memory left out. The cost reward scores
wall-clock latency, so on a loaded machine `cost` (and the totals built on it) can differ between
two runs of the same code; those differences are reported apart, and the old run's generations
are then re-scored with the current code, which must reproduce every stored score exactly.
Prints one line per table and exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import json
import sys

import duckdb
import pyarrow as pa

from aerorl_ops.config.rewards import parse_rewards
from aerorl_ops.generation.generations_table import GENERATION_SCHEMA
from aerorl_ops.scoring.partition_scores import SCORE_SCHEMA, score_generations
from aerorl_ops.storage.behaviour_rows import LATENCY_DEPENDENT, MEASURED, columns, rows


def normalized(table_rows: list[tuple], run_id: str, root: str | None) -> list[tuple]:
    """Rows with the run id and the checkout's root path replaced by placeholders."""

    def clean(value: object) -> object:
        if not isinstance(value, str):
            return value
        value = value.replace(run_id, "<run>")
        return value.replace(root, "<root>") if root else value

    return [tuple(clean(value) for value in row) for row in table_rows]


def compare(old_db: str, old_run: str, new_db: str, new_run: str,
            old_root: str | None = None, new_root: str | None = None) -> bool:
    same = True
    with duckdb.connect(old_db, read_only=True) as old, duckdb.connect(new_db, read_only=True) as new:
        for table, measured in MEASURED.items():
            old_columns, new_columns = columns(old, table), columns(new, table)
            if old_columns != new_columns:
                print(f"{table}: schema differs\n  old {old_columns}\n  new {new_columns}")
                same = False
                continue
            names = [name for name, _ in old_columns if name not in measured]
            old_rows = normalized(rows(old, table, old_run, names), old_run, old_root)
            new_rows = normalized(rows(new, table, new_run, names), new_run, new_root)
            differing = [i for i, (a, b) in enumerate(zip(old_rows, new_rows, strict=False)) if a != b]
            if len(old_rows) != len(new_rows) or differing:
                selected = [name for name in names if name != "run_id"]
                columns_differing = sorted({selected[j]
                                            for i in differing
                                            for j, (a, b) in enumerate(zip(old_rows[i], new_rows[i], strict=True))
                                            if a != b})
                latency_only = set(columns_differing) <= LATENCY_DEPENDENT.get(table, set())
                print(f"{table}: {len(old_rows)} vs {len(new_rows)} rows, {len(differing)} differ in "
                      f"{columns_differing}{' (latency-dependent only)' if latency_only else ''}")
                same = same and latency_only and len(old_rows) == len(new_rows)
            else:
                print(f"{table}: {len(old_rows)} rows identical ({len(names)} columns compared)")
    return same


def rescored_scores_match(database: str, run_id: str) -> bool:
    """Re-score the stored generations of ``run_id`` with the current code; compare with the stored scores."""
    same = True
    with duckdb.connect(database, read_only=True) as conn:
        partitions = conn.execute("SELECT DISTINCT model_key, batch_size FROM generations "
                                  "WHERE run_id = ? ORDER BY ALL", [run_id]).fetchall()
        for model_key, batch_size in partitions:
            key = [run_id, model_key, batch_size]
            generations = pa.table(conn.sql(
                f"SELECT {', '.join(GENERATION_SCHEMA.names)} FROM generations "
                "WHERE run_id = ? AND model_key = ? AND batch_size = ? ORDER BY sample_id", params=key,
            ).to_arrow_table())
            stored = conn.execute(f"SELECT {', '.join(SCORE_SCHEMA.names)} FROM reward_scores "
                                  "WHERE run_id = ? AND model_key = ? AND batch_size = ? ORDER BY sample_id",
                                  key).fetchall()  # in the scorer's column order (older databases appended columns)
            config = json.loads(stored[0][SCORE_SCHEMA.names.index("reward_config")])
            settings = parse_rewards("stored reward_config", {name: value for name, value in config.items()
                                                                 if value is not None})
            rescored = [tuple(row.values()) for row in
                        score_generations(generations.cast(GENERATION_SCHEMA), settings).to_pylist()]
            differing = sum(a != b for a, b in zip(rescored, stored, strict=True))
            print(f"re-scored {model_key} batch {batch_size}: {len(stored) - differing} of {len(stored)} "
                  "stored score rows reproduced exactly")
            same = same and differing == 0
    return same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old_database")
    parser.add_argument("old_run_id")
    parser.add_argument("new_database")
    parser.add_argument("new_run_id")
    parser.add_argument("--old-root", help="checkout path of the old run (replaced by <root> in values)")
    parser.add_argument("--new-root", help="checkout path of the new run")
    args = parser.parse_args(argv)
    same = compare(args.old_database, args.old_run_id, args.new_database, args.new_run_id,
                   args.old_root, args.new_root)
    same = rescored_scores_match(args.old_database, args.old_run_id) and same
    print("same behaviour" if same else "DIFFERENT")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
