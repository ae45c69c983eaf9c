"""``python -m aerorl_ops.replay``: the same command as ``aerorl replay``."""

import sys

from aerorl_ops.replay.cli import main

sys.exit(main())
