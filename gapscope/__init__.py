"""gapscope: why was the GPU idle? The one installed import name.

The repository keeps its layout (``tui/``, ``capture/`` at the top); the wheel installs them as ``gapscope.tui`` and
``gapscope.capture`` (``[tool.setuptools.package-dir]`` in pyproject.toml), so nothing generic lands in a user's
site-packages. In a checkout that was never installed (a GPU node with only torch), ``python -m gapscope`` from the
repository root finds the same packages: this package's path then also holds the repository root.
"""

from __future__ import annotations

import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
if not _os.path.isdir(_os.path.join(_here, "tui")):  # a checkout (or an editable install): tui/ sits beside us
    _root = _os.path.dirname(_here)
    if _os.path.isfile(_os.path.join(_root, "tui", "__init__.py")) and _root not in __path__:
        __path__.append(_root)  # noqa: F821 - the package's own __path__

__version__ = "0.1.0"
