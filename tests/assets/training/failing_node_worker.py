"""A torchrun rank of the failing-node test (``test_local_nodes``): rank 1 raises at once and records
its error as every training rank does (``rank_failures.record_failure``); every other rank sleeps for
``SLEEP_S``, in no collective, so only the launcher stopping its node ends it early.

    ... -m tests.assets.training.failing_node_worker FAILURES_FOLDER
"""

from __future__ import annotations

import os
import sys
import time

from assets.training.rank_failures import record_failure

SLEEP_S = 120
ERROR = "rank 1 failed on purpose"


def main(failures: str) -> None:
    if os.environ["RANK"] != "1":
        time.sleep(SLEEP_S)
        return
    try:
        raise RuntimeError(ERROR)
    except RuntimeError as error:
        record_failure({"failures": failures}, error)
        raise


if __name__ == "__main__":
    main(*sys.argv[1:])
