"""Where the code runs: inside a Jupyter kernel (widgets render) or not."""

from __future__ import annotations

import sys

__all__ = ["in_notebook"]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (ipykernel's ZMQ shell, or a subclass of it: Colab's
    ``google.colab._shell.Shell``, Kaggle's), where widgets can render."""
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except AttributeError:
        return False
    return ip is not None and any(c.__name__ == "ZMQInteractiveShell" for c in type(ip).__mro__)
