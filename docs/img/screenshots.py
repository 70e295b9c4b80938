"""Regenerate the ProgressPanel screenshots in docs/img/ from a real JupyterLab.

Needs (docs only, not package dependencies): ``pip install jupyterlab`` and a
Chromium (``apt-get install -y chromium``). Everything stays on 127.0.0.1.

1. Build a small notebook: a real run against the simulator, then a panel fed a
   replay of recorded events (a batch paused by a Retry-After, with fleet samples).
2. Execute it with nbclient, saving the widget state into the notebook.
3. Serve it with JupyterLab (token auth, news fetching off) and screenshot each
   panel with headless Chromium; JupyterLab renders widgets from the saved state.

Run: ``python docs/img/screenshots.py``
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbformat.sign import NotebookNotary

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PORT = 8899
CDP_PORT = 9229

SETUP = """\
import pandas as pd

import geotoolkit
from geotoolkit.providers import Nominatim
from geotoolkit.testing import ProviderSimulator
from geotoolkit.display.widget import ProgressPanel

sim = ProviderSimulator(rate_limit=20).start()
provider = Nominatim(sim.url, user_agent="geotoolkit-docs/1.0")
addresses = pd.read_csv("data/addresses.csv", dtype={"address": "string"})"""

FINISHED = """\
result = addresses.geocode.run(
    "address", provider=provider, rate=18, gate="memory://", cache=False)"""

REPLAY = """\
from geotoolkit.progress import BatchStarted, FleetSampled, ItemFinished, Throttled
host = "nominatim.example.org"
panel = ProgressPanel(label="Geocoding 500 stores")  # a replay of a paused batch's events
panel(BatchStarted(total=500, unique=500, rate=20.0, host=host, at=0.0))
for i in range(212):
    panel(ItemFinished(status="matched" if i % 40 else "no_match", attempts=1, at=0.05 * i))
panel(Throttled(wait_seconds=12.0, cause="retry-after", host=host, status_code=429,
                retry_after=12.0, at=10.6))
panel(FleetSampled(pace=19.4, allowed_rate=20.0, requests=640, successes=634, throttled=6,
                   window_seconds=30.0, pause_remaining=12.0,
                   pause_cause=f"Retry-After from {host}: 12 s", workers_active=3, at=10.6))
panel.flush()"""


def build(workdir: Path) -> Path:
    shutil.copytree(REPO / "notebooks" / "data", workdir / "data")
    cells = [nbformat.v4.new_code_cell(src) for src in (SETUP, FINISHED, REPLAY)]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    NotebookClient(nb, timeout=60, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(workdir)}}).execute()
    # Widget outputs render only in trusted notebooks: sign them, in a scratch database.
    notary = NotebookNotary(db_file=str(workdir / "signatures.db"))
    for index in (1, 2):  # one notebook per panel, so each screenshot shows one
        single = nbformat.from_dict(json.loads(json.dumps(nb)))
        single.cells = [nb.cells[index]]
        notary.sign(single)
        nbformat.write(single, workdir / f"panel{index}.ipynb")
    return workdir


def serve(workdir: Path, token: str) -> subprocess.Popen[bytes]:
    settings = workdir / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    widgets = workdir / "settings" / "@jupyter-widgets" / "jupyterlab-manager"
    widgets.mkdir(parents=True)  # render widgets from the state saved in the notebook
    (widgets / "plugin.jupyterlab-settings").write_text(json.dumps({"saveState": True}))
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(workdir / "settings")}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
         f"--port={PORT}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={workdir}",
         f"--NotebookNotary.db_file={workdir / 'signatures.db'}", "--allow-root"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(60):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/api/status?token={token}", timeout=1)
            return server
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise RuntimeError("JupyterLab did not start")


class Browser:
    """Headless Chromium driven over the DevTools protocol (websocket-client, a JupyterLab
    dependency), so we can wait in real time until the widget has rendered."""

    def __init__(self) -> None:
        import websocket

        self.profile = tempfile.mkdtemp()
        self.process = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", f"--user-data-dir={self.profile}", "--window-size=1100,900",
             f"--remote-debugging-port={CDP_PORT}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pages = _wait_json(f"http://127.0.0.1:{CDP_PORT}/json")
        url = next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")
        self.ws = websocket.create_connection(url, timeout=60, suppress_origin=True)
        self.ids = 0

    def call(self, method: str, **params: object) -> dict[str, object]:
        self.ids += 1
        self.ws.send(json.dumps({"id": self.ids, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.ids:
                return reply.get("result", {})  # type: ignore[no-any-return]

    def evaluate(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")  # type: ignore[attr-defined]

    def shoot(self, url: str, target: Path, selector: str) -> None:
        self.call("Page.navigate", url=url)
        box = f"document.querySelector({selector!r})"
        for _ in range(120):  # the page, the kernel and the widget manager start for real
            if self.evaluate(f"!!{box} && !!document.querySelector('.jp-OutputArea-output .widget-vbox')"):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"no widget rendered at {url}")
        # Widgets rendered from saved state (no live kernel model) carry a "disconnected"
        # link icon; hide it, the panel itself is unchanged.
        self.evaluate("document.head.insertAdjacentHTML('beforeend', '<style>"
                      ".jupyter-widgets-disconnected::before{display:none!important}</style>')")
        time.sleep(1.0)  # let layout settle
        rect = self.evaluate(f"(r => [r.x, r.y, r.width, r.height])({box}.getBoundingClientRect())")
        x, y, w, h = rect  # type: ignore[misc]
        clip = {"x": x - 8, "y": y - 8, "width": w + 16, "height": h + 16, "scale": 1}
        data = self.call("Page.captureScreenshot", format="png", clip=clip)["data"]
        target.write_bytes(base64.b64decode(data))  # type: ignore[arg-type]

    def close(self) -> None:
        self.ws.close()
        self.process.terminate()
        self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def _wait_json(url: str) -> list[dict[str, str]]:
    for _ in range(60):
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return json.loads(response.read())  # type: ignore[no-any-return]
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer")


def main() -> None:
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = build(Path(tmp))
        server = serve(workdir, token)
        browser = Browser()
        try:
            shots = (("panel1", "panel.png", ".jp-CodeCell"),
                     ("panel2", "panel-paused.png", ".jp-OutputArea-output .widget-vbox"))
            for name, target, selector in shots:
                url = f"http://127.0.0.1:{PORT}/doc/tree/{name}.ipynb?token={token}"
                browser.shoot(url, HERE / target, selector)
        finally:
            browser.close()
            server.terminate()
            server.wait()
    print("wrote", HERE / "panel.png", "and", HERE / "panel-paused.png")


if __name__ == "__main__":
    main()
