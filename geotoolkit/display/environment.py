"""Where the code runs: inside a Jupyter kernel (widgets render) or not."""

from __future__ import annotations

import importlib
import sys

__all__ = ["in_notebook", "widgets_available"]


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


def widgets_available() -> bool:
    """True inside a Jupyter kernel that can import ipywidgets: where the panels render.
    A kernel without it (another environment's kernel, a hand-built conda env) gets the
    text forms instead of a ``ModuleNotFoundError``."""
    if not in_notebook():
        return False
    try:
        importlib.import_module("ipywidgets")
    except ImportError:
        return False
    return True
