"""``python -m capture ...``: the same as ``gapscope capture ...``, with only torch installed."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
