"""Make the lessons' Jupyter kernel import torch's tracer and ``helpers`` while it starts.

Every lesson's first cells import torch and helpers, and its first ``helpers.lower`` call imports
``torch._dynamo`` (the tracer ``torch.export`` runs on): about 3 s on a 2-core machine. A kernel
starts when a notebook is opened, while the learner reads its introduction, so doing those imports
at start-up (``IPKernelApp.exec_lines``) moves them out of the wait after *Run All*. The
ahead-of-time compiler (``executorch.exir``, ~4 s) is not preloaded: a lesson whose programs are
cached never needs it.

    python tools/kernelspec.py        # edits the venv's kernel.json (run by `make` after ipykernel install)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PRELOAD = "--IPKernelApp.exec_lines=import torch._dynamo, helpers"


def main() -> None:
    spec_path = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    spec = json.loads(spec_path.read_text())
    argv = [a for a in spec["argv"] if not a.startswith("--IPKernelApp.exec_lines")]
    argv.insert(argv.index("{connection_file}") + 1, PRELOAD)
    spec["argv"] = argv
    spec_path.write_text(json.dumps(spec, indent=1) + "\n")
    print(f"{spec_path}: kernels preload torch._dynamo and helpers")


if __name__ == "__main__":
    main()
