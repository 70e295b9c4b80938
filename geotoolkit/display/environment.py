"""Where the code runs: inside a Jupyter kernel (widgets render) or not."""

from __future__ import annotations

import sys

__all__ = ["in_notebook"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (ZMQ shell), where widgets can render."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except AttributeError:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"
