"""One module per ``gapscope`` command, each with ``NAME``, ``HELP``, ``add_parser(sub)`` and ``run(args)``.

``COMMANDS`` is the order they appear in ``gapscope --help``; ``gapscope/cli.py`` builds the parser from it and runs the
chosen one. A new command is one module here and one line in ``COMMANDS``. Each module imports what its ``run``
needs inside ``run``, so ``gapscope info`` never pays for textual and nothing but ``capture`` touches torch.
"""

from __future__ import annotations

from . import capture, diff, info, open, report  # noqa: A004 - ``open`` is the command's name

COMMANDS = (open, info, report, diff, capture)
BY_NAME = {c.NAME: c for c in COMMANDS}

__all__ = ["COMMANDS", "BY_NAME"]
