"""Evaluation: a model against its baseline at MAYE's three sampling settings (``eval_run``)."""
