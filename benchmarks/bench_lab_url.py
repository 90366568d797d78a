"""`make lab` on an empty cache: seconds from the command to JupyterLab's URL in the terminal.

    python benchmarks/bench_lab_url.py

Starts ``tools/lab.py`` (what ``make lab`` runs) with a private, empty cache of lowered programs and private
Jupyter folders, reads the terminal until the URL is printed, checks that the background warm-up has started
(its log in the cache folder), then stops it the way a learner does (SIGTERM, which JupyterLab and the
warm-up both receive). Goal (issue "A newcomer's first ten minutes"): ≤ 60 s. Writes
``test-output/bench-lab-url.json`` (read by ``benchmarks/report.py``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
URL = re.compile(r"http://127\.0\.0\.1:\d+/lab\?token=")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-lab-url-") as tmp:
        env = {**os.environ, "EXPORTLAB_CACHE_DIR": str(Path(tmp) / "cache"),
               "JUPYTER_RUNTIME_DIR": str(Path(tmp) / "runtime"), "JUPYTER_CONFIG_DIR": str(Path(tmp) / "config")}
        start = time.perf_counter()
        lab = subprocess.Popen([sys.executable, str(ROOT / "tools" / "lab.py"), "--no-browser", "--allow-root",
                                "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={_free_port()}",
                                f"--ServerApp.root_dir={ROOT / 'notebooks'}"],
                               env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen: dict[str, float] = {}

        def read() -> None:
            assert lab.stdout is not None
            for line in lab.stdout:
                if "url" not in seen and URL.search(line):
                    seen["url"] = time.perf_counter() - start

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = start + 300
        while "url" not in seen and time.perf_counter() < deadline and lab.poll() is None:
            time.sleep(0.1)
        time.sleep(3)  # let the warm-up write its first line
        warming = (Path(tmp) / "cache" / "warm.log").exists()
        lab.send_signal(signal.SIGTERM)
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            lab.kill()
        if "url" not in seen:
            raise SystemExit("make lab printed no URL within 300 s")
    result = {"url_s": round(seen["url"], 1), "warm_up_started": warming}
    print(f"make lab, empty cache: URL after {result['url_s']} s; background warm-up started: {warming}   (goal ≤ 60 s)")
    out = ROOT / "test-output" / "bench-lab-url.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
