"""Where the code runs: a real kernel whose shell subclasses ipykernel's, as Colab's does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[2]

# Colab's get_ipython() is google.colab._shell.Shell, declared
# `class Shell(zmqshell.ZMQInteractiveShell)`; Kaggle and other hosted notebooks subclass too.
HOSTED = '''
from ipykernel.ipkernel import IPythonKernel
from ipykernel.zmqshell import ZMQInteractiveShell
from traitlets import Type


class Shell(ZMQInteractiveShell):
    """A hosted notebook's own shell."""


class Kernel(IPythonKernel):
    shell_class = Type(Shell)
'''


def test_a_hosted_notebook_whose_shell_subclasses_the_kernel_shell_is_a_notebook(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Colab counted as no notebook: progress='auto' chose the terminal line, and as stderr
    is no terminal there, no progress at all; fleet_panel printed text."""
    from nbclient import NotebookClient

    (tmp_path / "hosted_shell.py").write_text(HOSTED, encoding="utf-8")
    spec = tmp_path / "kernels" / "hosted"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher",
            "--IPKernelApp.kernel_class=hosted_shell.Kernel", "-f", "{connection_file}"]
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}"}
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "hosted",
                                                  "language": "python", "env": env}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    code = ("from geotoolkit.display.environment import in_notebook\n"
            "from geotoolkit.display.sinks import progress_sink\n"
            "print(type(get_ipython()).__name__, in_notebook(), "
            "type(progress_sink('auto')).__name__)")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(notebook, timeout=60, kernel_name="hosted",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(o.get("text", "") for o in notebook.cells[0].outputs)
    assert printed.strip() == "Shell True ProgressPanel"


def test_the_text_line_rewrites_itself_in_a_notebook_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel's stderr is no terminal, but the notebook honours ``\\r``: progress='text'
    there keeps one line rewritten in place, not a new line every 10 s."""
    from nbclient import NotebookClient

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    code = ("from geotoolkit.display.text import TextProgress\n"
            "from geotoolkit.progress import BatchStarted, ItemFinished\n"
            "import io\n"
            "line, elsewhere = TextProgress(), TextProgress(io.StringIO())\n"
            "print(line.interactive, elsewhere.interactive)\n"
            "line(BatchStarted(total=2, unique=2))\n"
            "line(ItemFinished('matched'))\n")
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(notebook, timeout=60, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    assert "".join(o.text for o in outputs if o.name == "stdout").strip() == "True False"
    assert "\r" in "".join(o.text for o in outputs if o.name == "stderr")
