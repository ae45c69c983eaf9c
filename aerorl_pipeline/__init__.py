"""AeroRL Pipeline's code location (``aerorl_pipeline.definitions``) and the ``aerorl`` command.

Importing this package sets torch's OpenMP defaults for CPUs shared with other jobs
(``aerorl_ops.cpu_threads.configure_cpu_threads``: idle threads sleep, one thread per CPU this process
may use; a user's own ``OMP_WAIT_POLICY`` / ``OMP_NUM_THREADS`` are kept). It happens here because
this package is imported before ``aerorl_pipeline.cli`` (the ``aerorl`` command) and
``aerorl_pipeline.definitions`` (what ``dagster dev`` loads), and so before either imports torch:
OpenMP reads these variables once, as torch loads it. That makes this the one environment change at
import time, an exception to the rule against them.
"""

from aerorl_ops.cpu_threads import configure_cpu_threads

configure_cpu_threads()
