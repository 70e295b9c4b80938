"""Where the code runs: a real kernel whose shell subclasses ipykernel's, as Colab's does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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


def _run_in_a_kernel(code: str,
                     monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, list[Any]]:
    """``code`` run as one cell in a real python3 kernel that imports this checkout: what it
    wrote to stdout and to stderr, and all its outputs."""
    from nbclient import NotebookClient

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(notebook, timeout=60, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    stdout, stderr = ("".join(o.text for o in outputs if o.get("name") == name)
                      for name in ("stdout", "stderr"))
    return stdout, stderr, outputs


def test_the_text_line_rewrites_itself_in_a_notebook_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel's stderr is no terminal, but the notebook honours ``\\r``: progress='text'
    there keeps one line rewritten in place, not a new line every 10 s."""
    code = ("from geotoolkit.display.text import TextProgress\n"
            "from geotoolkit.progress import BatchStarted, ItemFinished\n"
            "import io\n"
            "line, elsewhere = TextProgress(), TextProgress(io.StringIO())\n"
            "print(line.interactive, elsewhere.interactive)\n"
            "line(BatchStarted(total=2, unique=2))\n"
            "line(ItemFinished('matched'))\n")
    stdout, stderr, _ = _run_in_a_kernel(code, monkeypatch)
    assert stdout.strip() == "True False"
    assert "\r" in stderr


def test_without_ipywidgets_a_notebook_run_falls_back_to_the_text_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel whose environment lacks ipywidgets (a conda env built by hand, a kernel
    of another venv) failed every run with ``ModuleNotFoundError: ipywidgets``: 'auto'
    chose the panel inside any kernel. Now the text line says the same there, and
    fleet_panel prints its text."""
    code = ('import sys; sys.modules["ipywidgets"] = None  # not importable\n'
            "import pandas as pd\n"
            "import geotoolkit\n"
            "from geotoolkit.gate import MemoryGate\n"
            "from geotoolkit.providers import Nominatim\n"
            "from geotoolkit.testing import ProviderSimulator\n"
            "sim = ProviderSimulator(rate_limit=50).start()\n"
            "df = pd.DataFrame({'address': ['Städtle 38, 9490 Vaduz, Liechtenstein'] * 3})\n"
            "provider = Nominatim(sim.url, user_agent='test/1.0 (test@example.org)')\n"
            "result = df.geocode.run('address', provider=provider, rate=40, gate='memory://',\n"
            "                        cache=False)\n"
            "print('statuses', result.geocode_status.tolist())\n"
            "shown = geotoolkit.fleet_panel(MemoryGate())\n"
            "print('fleet', type(shown).__name__)\n"
            "sim.stop()\n")
    stdout, stderr, outputs = _run_in_a_kernel(code, monkeypatch)
    assert "statuses ['matched', 'matched', 'matched']" in stdout
    assert "3/3 rows: 3 matched, 0 no match, 0 failed; 0 throttled;" in stderr
    assert "fleet FleetText" in stdout and "gate memory" in stdout
    assert not [o for o in outputs if o.output_type == "display_data"]
