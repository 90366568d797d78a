"""`make lab`: JupyterLab at once, and the lessons' programs built in the background while it runs.

    python tools/lab.py [jupyter lab options ...]

JupyterLab starts first and prints its URL as usual. Beside it, ``tools/notebooks.py warm --background`` runs
every lesson once, in lesson order, at the lowest CPU priority (so the learner's kernel is served first), and
writes its progress to the terminal and to ``$EXPORTLAB_CACHE_DIR/warm.log`` (``python tools/notebooks.py
warm-status`` and a cell of lesson 00 say where it stands). Ctrl-C is JupyterLab's (it asks to confirm); when
JupyterLab exits, the warm-up stops, and this command exits with JupyterLab's status.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    os.environ.setdefault("EXPORTLAB_CACHE_DIR", str(ROOT / ".cache" / "exportlab"))
    jupyter = Path(sys.executable).with_name("jupyter")
    # widget replies without Nagle's 40 ms stall: jupyter/server/exportlab_server.py
    server_settings = str(ROOT / "jupyter" / "server")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [server_settings, os.environ.get("PYTHONPATH")]))}
    lab = subprocess.Popen([str(jupyter), "lab",
                            "--ServerApp.kernel_websocket_connection_class=exportlab_server.NoDelayKernelConnection",
                            *argv], env=env)
    warm = subprocess.Popen([sys.executable, str(ROOT / "tools" / "notebooks.py"), "warm", "--background",
                             "--watch-pid", str(lab.pid)])

    def forward(signum: int, _frame: object) -> None:
        for proc in (lab, warm):
            if proc.poll() is None:
                proc.send_signal(signum)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's Ctrl-C reaches JupyterLab itself
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGHUP, forward)
    code = lab.wait()
    if warm.poll() is None:
        warm.terminate()
        try:
            warm.wait(timeout=10)
        except subprocess.TimeoutExpired:
            warm.kill()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
