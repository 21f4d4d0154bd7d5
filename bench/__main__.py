"""``python -m bench``: see ``bench/README.md``."""

import sys

from .cli import main

sys.exit(main())
