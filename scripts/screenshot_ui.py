"""Screenshot the Dagster UI's asset graph with headless Chromium.

Starts ``dagster dev -m aerorl_pipeline.definitions`` on a free loopback port with a fresh
``DAGSTER_HOME`` (a copy of the project's ``dagster.yaml``, so nothing touches ``.dagster_home``),
waits until the code location has loaded, marks the first-visit pop-up as seen through the
``setNuxSeen`` GraphQL mutation, lets Chromium render the ``benchmark`` group's asset graph
(``/locations/<repository>@<location>/asset-groups/benchmark``; ``/asset-groups`` is the global
lineage, with groups collapsed) and saves it with a small palette::

    python scripts/screenshot_ui.py --output docs/asset-graph.png

Needs a ``chromium`` binary (Debian: ``apt-get install -y chromium``). ``dagster_dev`` and
``graphql`` are also what ``tests/aerorl_pipeline/test_dagster_dev_ui.py`` uses.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
INSTANCE_SETTINGS = PROJECT_ROOT / ".dagster_home" / "dagster.yaml"
MODULE = "aerorl_pipeline.definitions"
LOCATION_NAME = MODULE  # `dagster dev -m X` names the code location after the module
ASSET_GRAPH_PATH = f"/locations/__repository__@{LOCATION_NAME}/asset-groups/benchmark"

LOCATION_STATUS = """
query { workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""
SET_NUX_SEEN = "mutation { setNuxSeen }"


@dataclass(frozen=True)
class DevServer:
    url: str
    process: subprocess.Popen
    log_path: Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(url: str, query: str, variables: dict | None = None, timeout_s: float = 30.0) -> dict:
    """POST ``query`` to ``<url>/graphql``; the ``data`` of the answer (GraphQL errors raise)."""
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{url}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        answer = json.load(response)
    if answer.get("errors"):
        raise RuntimeError(f"GraphQL errors from {url}: {answer['errors']}")
    return answer["data"]


def _default_signals() -> None:
    """In the child before exec: a shell's background job inherits SIGINT ignored, and ignored
    signals stay ignored across exec, so dagster dev could never be interrupted. Restore them."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (Linux /proc; elsewhere, whether the group exists)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        return [pgid]
    members = []
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields after "(comm)": state, ppid, pgrp
            members.append(int(stat.parent.name))
    return members


def stop_group(process: subprocess.Popen, grace_s: float = 30.0) -> list[str]:
    """Stop ``process`` and everything in its process group: SIGINT (dagster dev's own clean
    shutdown), then SIGTERM, then SIGKILL. Returns the signals that were needed."""
    pgid = process.pid  # started with start_new_session=True: the group is the leader's pid
    sent = []
    for signum, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        if not _live_members(pgid):
            break
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            break
        sent.append(signum.name)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if process.poll() is not None and not _live_members(pgid):
                break
            time.sleep(0.2)
    process.wait(timeout=10)
    return sent


def wait_until_loaded(url: str, process: subprocess.Popen, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dagster dev exited with {process.returncode}; log:\n{log_path.read_text()[-4000:]}")
        try:
            entries = graphql(url, LOCATION_STATUS, timeout_s=5)["workspaceOrError"]["locationEntries"]
        except (urllib.error.URLError, ConnectionError, TimeoutError, RuntimeError, KeyError):
            entries = []
        for entry in entries:
            if entry["name"] == LOCATION_NAME and entry["loadStatus"] == "LOADED":
                location = entry["locationOrLoadError"]
                if location and location["__typename"] == "PythonError":
                    raise RuntimeError(f"code location {LOCATION_NAME} failed to load: {location['message']}")
                return
        time.sleep(1.0)
    raise TimeoutError(f"dagster dev at {url} did not load {LOCATION_NAME} within {timeout_s:.0f} s; "
                       f"log:\n{log_path.read_text()[-4000:]}")


@contextmanager
def dagster_dev(home: Path, timeout_s: float = 240.0) -> Iterator[DevServer]:
    """``dagster dev`` on a free loopback port with ``home`` as DAGSTER_HOME, loaded and ready;
    stopped (with every process it started) on exit."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(INSTANCE_SETTINGS, home / "dagster.yaml")
    port = free_port()
    log_path = home / "dagster-dev.log"
    env = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "dagster", "dev", "-m", MODULE, "--host", "127.0.0.1", "--port", str(port)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_default_signals)
    server = DevServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_until_loaded(server.url, process, log_path, timeout_s)
        yield server
    finally:
        stop_group(process)


def screenshot(url: str, output: Path, profile_dir: Path, chromium: str = "chromium",
               window: str = "1600,1000", budget_ms: int = 20000) -> Path:
    """Render ``url`` headless and write the PNG to ``output``."""
    output.parent.mkdir(parents=True, exist_ok=True)
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={profile_dir}", f"--screenshot={output}", f"--window-size={window}",
               f"--virtual-time-budget={budget_ms}", url]
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=180,
                   start_new_session=True)
    if not output.exists():
        raise RuntimeError(f"{chromium} wrote no screenshot to {output}")
    return output


def shrink_png(path: Path, colors: int = 64) -> Path:
    """Re-encode a screenshot with an adaptive palette (a UI has few colours): about a third of the size."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=PROJECT_ROOT / "docs" / "asset-graph.png")
    parser.add_argument("--path", default=ASSET_GRAPH_PATH, help="UI page to render (default: the benchmark group)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser")
                        or "chromium")
    parser.add_argument("--window-size", default="1600,1000")
    parser.add_argument("--virtual-time-budget-ms", type=int, default=20000)
    parser.add_argument("--colors", type=int, default=64, help="palette size of the saved PNG; 0 keeps Chromium's PNG")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aerorl-ui-") as scratch:
        scratch_dir = Path(scratch)
        with dagster_dev(scratch_dir / "dagster_home") as server:
            graphql(server.url, SET_NUX_SEEN)
            path = screenshot(server.url + args.path, args.output.resolve(), scratch_dir / "chromium-profile",
                              args.chromium, args.window_size, args.virtual_time_budget_ms)
    if args.colors:
        shrink_png(path, args.colors)
    print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
