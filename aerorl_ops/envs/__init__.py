"""Task environments: dataset rows as episodes, replies as rewards plus a ``correct`` flag.

``registry.make_env(name, **settings)`` builds one of ``ENVIRONMENTS`` (``easy_vqa``, ``docvqa``,
``chartqa``, ``jsonl``, ``parquet``); ``reset(index)`` gives an episode's state and
observation, ``step(state, completion)`` its reward, ``done`` and :class:`StepInfo`.
"""
