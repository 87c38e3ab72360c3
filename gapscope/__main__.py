"""``python -m gapscope ...``: the same as the ``gapscope`` command."""

import sys

from .cli import main

sys.exit(main())
