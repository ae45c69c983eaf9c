"""The benchmark: generation, scoring and the DuckDB report per (model, batch size) partition, with
their partitions and asset checks."""
