"""Dataset rows: cached question / answers / image rows that every other stage reads."""
