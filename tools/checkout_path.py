"""Put this checkout on the virtual environment's path, so that ``import helpers`` works in every process of it.

``pip install -e .`` installs the folder ``helpers/`` under the import name ``exportlab`` only (with the
``export-doctor`` command): an installed top-level ``helpers`` would clash with the many projects that have a
module of that name. The lessons, their kernels, the tests and the tools of *this* checkout import ``helpers``, so
``make`` writes one ``.pth`` file into the environment's ``site-packages`` naming the checkout's folder (the way
an editable install of a flat layout puts its project on the path):

    python tools/checkout_path.py        # run by `make` after `pip install -e .`
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PTH_NAME = "exportlab-checkout.pth"


def main() -> None:
    path = Path(sysconfig.get_paths()["purelib"]) / PTH_NAME
    path.write_text(f"{ROOT}\n", encoding="utf-8")
    print(f"{path}: `import helpers` reads {ROOT / 'helpers'}")


if __name__ == "__main__":
    main()
