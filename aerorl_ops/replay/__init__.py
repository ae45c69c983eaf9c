"""The replay CLI's library side: reading replay JSONL files (``reader``, with DuckDB's fast path in
``fast_reader``) and the ``aerorl replay`` command (``cli``; ``python -m aerorl_ops.replay``)."""
