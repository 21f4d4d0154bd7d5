"""``python -m primflow ...``: the ``primflow`` command (see primflow/cli.py)."""

import sys

from .cli import main

sys.exit(main())
