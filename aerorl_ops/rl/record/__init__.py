"""A training run as rows: the DuckDB recorder, the row builders, the result, and the reporters.
"""
