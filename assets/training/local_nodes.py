"""Several torchrun nodes on this machine: one torchrun agent per node, meeting at a c10d rendezvous
on localhost. ``assets.training.torchrun`` runs it as the Pipes subprocess of ``rl_run`` when
``nnodes`` > 1 (``[training_launch] launcher = "local"``):

    python -m assets.training.local_nodes --nnodes 2 --nproc-per-node 1 --rdzv-id RUN --failures DIR \\
        -m assets.training.torchrun_worker

Each agent is ``torchrun --nnodes N --nproc-per-node P --rdzv-backend c10d --rdzv-endpoint
localhost:PORT --rdzv-id RUN``; node 0's agent hosts the rendezvous store on a free port, the others
join it. The agents inherit this process's environment (the Pipes context, ``OMP_NUM_THREADS``), so
whichever rank is rank 0 reports back as on one node. The launcher waits for every agent; when one
exits with an error it stops the others (each stops its ranks), writes ``node-<i>.json`` into the
failures folder (the ranks write their own ``rank-<r>.json`` first) and exits with that agent's code.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

POLL_S = 0.2
STOP_WAIT_S = 30.0
"""How long a stopped agent may take to stop its ranks before it is killed."""


def free_port() -> int:
    """A port nothing listens on now, on localhost (the rendezvous store's)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def agent_commands(nnodes: int, nproc_per_node: int, port: int, rdzv_id: str, worker: Sequence[str]) -> list[list[str]]:
    """One torchrun agent per node, meeting at a c10d rendezvous on ``localhost:port`` that node 0's agent
    hosts; each runs ``worker`` (``["-m", module, *args]``) on ``nproc_per_node`` ranks."""
    return [[sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc-per-node",
             str(nproc_per_node), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"localhost:{port}", "--rdzv-id",
             rdzv_id, "--rdzv-conf", f"is_host={str(node == 0).lower()}", *worker] for node in range(nnodes)]


def node_failure_path(folder: Path, node: int) -> Path:
    return Path(folder) / f"node-{node}.json"


def stop(agents: Sequence[subprocess.Popen]) -> None:
    """Stop every agent still running (SIGTERM: it stops its ranks), killing one that takes over
    ``STOP_WAIT_S``."""
    running = [agent for agent in agents if agent.poll() is None]
    for agent in running:
        agent.terminate()
    deadline = time.monotonic() + STOP_WAIT_S
    for agent in running:
        try:
            agent.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()


def run_agents(commands: Sequence[Sequence[str]], failures: Path | None = None) -> int:
    """Start every agent of ``commands`` and wait for all of them: 0 when all succeed. When one exits
    with an error, the others are stopped, ``failures/node-<i>.json`` names it, and its exit code is
    returned. Stopped from outside (SIGTERM, Ctrl-C), it stops every agent first."""
    agents = [subprocess.Popen(list(command)) for command in commands]  # this process's environment
    try:
        while True:
            codes = [agent.poll() for agent in agents]
            failed = next((node for node, code in enumerate(codes) if code not in (None, 0)), None)
            if failed is not None:
                if failures is not None:
                    node_failure_path(failures, failed).write_text(json.dumps({
                        "node": failed, "time": time.time(),
                        "error": f"its torchrun agent exited with code {codes[failed]}"}))
                return codes[failed]
            if all(code == 0 for code in codes):
                return 0
            time.sleep(POLL_S)
    finally:
        stop(agents)


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # runs run_agents' finally: the agents are stopped too


def main(argv: Sequence[str] | None = None) -> int:
    """``[launcher options] -m MODULE [its arguments]``: everything from ``-m`` on is what each rank runs."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-m" not in argv:
        raise SystemExit("local_nodes: name the module every rank runs: ... -m MODULE [ARGS]")
    split = argv.index("-m")
    parser = argparse.ArgumentParser(prog="python -m assets.training.local_nodes", description=__doc__.split("\n")[0])
    parser.add_argument("--nnodes", type=int, required=True)
    parser.add_argument("--nproc-per-node", type=int, required=True)
    parser.add_argument("--rdzv-id", required=True)
    parser.add_argument("--failures", type=Path, default=None, help="folder for node-<i>.json of a failed agent")
    args = parser.parse_args(argv[:split])
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    commands = agent_commands(args.nnodes, args.nproc_per_node, free_port(), args.rdzv_id, argv[split:])
    return run_agents(commands, failures=args.failures)


if __name__ == "__main__":
    sys.exit(main())
