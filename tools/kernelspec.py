"""Set up the lessons' Jupyter kernel: quiet library output, and torch's tracer imported while it starts.

Two start-up lines run in every IPython kernel of this virtual environment (JupyterLab's, `make
notebooks`' and nbval's), written to ``<venv>/etc/ipython/ipython_kernel_config.py``, which IPython reads
for every kernel started with this Python:

- ``helpers.silence_library_noise()``: a lesson kernel opts in to quiet output (torch's and ExecuTorch's
  warnings and timestamped log lines change from run to run and would break strict nbval). Importing
  ``helpers`` alone changes nothing global, so the library behaves inside someone else's program.
- ``import torch._dynamo``: every lesson's first ``helpers.lower`` call needs the tracer ``torch.export``
  runs on (about 3 s on a 2-core machine). A kernel starts when a notebook is opened, while the learner
  reads its introduction, so importing it then moves that wait out of *Run All*. The ahead-of-time
  compiler (``executorch.exir``, ~4 s) is not preloaded: a lesson whose programs are cached never needs it.

    python tools/kernelspec.py        # run by `make` after `ipykernel install`
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

START_UP = ["import torch._dynamo, helpers", "helpers.silence_library_noise()"]
CONFIG = f"""# Written by tools/kernelspec.py: every IPython kernel of this environment runs these lines at start-up.
c.IPKernelApp.exec_lines = {START_UP!r}
"""


def main() -> None:
    config_path = Path(sys.prefix) / "etc" / "ipython" / "ipython_kernel_config.py"
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(CONFIG)
    # An older version of this script put the start-up line in kernel.json's argv: take it out.
    spec_path = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    if spec_path.exists():
        spec = json.loads(spec_path.read_text())
        spec["argv"] = [a for a in spec["argv"] if not a.startswith("--IPKernelApp.exec_lines")]
        spec_path.write_text(json.dumps(spec, indent=1) + "\n")
    print(f"{config_path}: kernels start with {'; '.join(START_UP)}")


if __name__ == "__main__":
    main()
