"""``python -m helpers.doctor``: see :mod:`helpers.doctor`."""

import sys

from .cli import main

sys.exit(main())
