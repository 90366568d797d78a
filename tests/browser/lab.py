"""Drive JupyterLab in headless Chromium like a learner: start a server, open a lesson, run it, poke its widgets.

The server is started by the tests themselves (127.0.0.1, a free port, a random token, a temporary
root holding copies of the notebooks) with the repo's JupyterLab settings (``jupyter/overrides.json``:
``windowingMode: none`` so every cell stays in the DOM) and stopped by its own process handle.
The browser is Debian's ``/usr/bin/chromium`` driven by Playwright (never a downloaded browser).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER_SETTINGS = ROOT / "jupyter" / "server"  # what make lab runs JupyterLab with (tools/lab.py)
NO_DELAY = "exportlab_server.NoDelayKernelConnection"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]

# Installed in the page: time of the learner's input event, time the watched output changed.
_PROBE_JS = """
() => {
  if (window.__exportlab) return;
  const state = window.__exportlab = {event: null, changed: null, armed: false, observer: null};
  for (const type of ['keydown', 'click', 'change']) {
    document.addEventListener(type, () => { if (state.armed && state.event === null) state.event = performance.now(); }, true);
  }
}
"""
_ARM_JS = """
(el) => {
  const state = window.__exportlab;
  if (state.observer) state.observer.disconnect();
  state.event = null; state.changed = null; state.armed = true;
  state.observer = new MutationObserver(() => {
    if (state.changed === null && state.event !== null) { state.changed = performance.now(); }
  });
  state.observer.observe(el, {subtree: true, childList: true, characterData: true, attributes: true});
}
"""


_FIRST_VERDICT_JS = r"""
() => {
  const state = window.__firstVerdict = {start: performance.now(), at: null};
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const found = () => {
    let seenPte = false;
    for (const out of panel.querySelectorAll('.jp-OutputArea-output')) {
      if (out.querySelector('.exportlab-verdict')) return true;
      const text = out.textContent || '';
      if (/^\.pte\b/m.test(text) || text.includes('RuntimeRejectedError')) return true;  // a .pte's own result
      if (/Failed to load method \w+, error: 0x/.test(text)) return true;  // the runtime refused to load it
      if (text.includes('→ .pte (')) seenPte = true;
      if (seenPte && /\b(match|matches|diverge|diverges|rejected|refused)\b/.test(text)) return true;
    }
    return false;
  };
  const observer = new MutationObserver(() => {
    if (state.at === null && found()) { state.at = performance.now(); observer.disconnect(); }
  });
  observer.observe(panel, {subtree: true, childList: true, characterData: true});
}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    """A JupyterLab server owned by the test session."""

    root: Path
    cache_dir: Path | None = None  # the lowered-program cache its kernels use (default: the repo's)
    port: int = field(default_factory=_free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(24))
    process: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> LabServer:
        notebooks = self.root / "notebooks"
        shutil.copytree(ROOT / "notebooks", notebooks, ignore=shutil.ignore_patterns("src", ".ipynb_checkpoints"))
        for sibling in ("tests", "helpers", "benchmarks", "pyproject.toml"):  # lessons read ../tests/... etc.
            (self.root / sibling).symlink_to(ROOT / sibling)
        env = dict(os.environ)
        if self.cache_dir is not None:
            env["EXPORTLAB_CACHE_DIR"] = str(self.cache_dir)
        env.setdefault("EXPORTLAB_CACHE_DIR", str(ROOT / ".cache" / "exportlab"))
        env["JUPYTER_RUNTIME_DIR"] = str(self.root / "runtime")
        env["JUPYTER_CONFIG_DIR"] = str(self.root / "config")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVER_SETTINGS), env.get("PYTHONPATH")]))
        jupyter = Path(sys.executable).with_name("jupyter")
        self.log = open(self.root / "jupyterlab.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [str(jupyter), "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
             f"--ServerApp.root_dir={notebooks}", f"--LabApp.app_settings_dir={ROOT / 'jupyter'}",
             f"--LabApp.user_settings_dir={self.root / 'user-settings'}", f"--LabApp.workspaces_dir={self.root / 'ws'}",
             "--LabApp.expose_app_in_browser=True", f"--ServerApp.kernel_websocket_connection_class={NO_DELAY}"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited early:\n{(self.root / 'jupyterlab.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2)
                return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("JupyterLab did not answer in time")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def notebook_url(self, name: str) -> str:
        """The lesson alone in a workspace of its own (``reset``: no tabs restored from an earlier lesson)."""
        workspace = name.removesuffix(".ipynb").replace("_", "-")
        return f"{self.url}/lab/workspaces/{workspace}/tree/{name}?reset&token={self.token}"

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if getattr(self, "log", None):
            self.log.close()


class LessonPage:
    """One lesson open in JupyterLab."""

    def starter_cells(self) -> list[tuple[int, str]]:
        """``(cell index, exercise id)`` of every exercise's starter cell (first line ``# ✏️ Exercise <id>``)."""
        return self.page.evaluate("""() => {
            const cells = window.jupyterapp.shell.currentWidget.content.widgets;
            const found = [];
            cells.forEach((c, i) => {
                const m = c.model.sharedModel.getSource().match(/^# ✏️ Exercise (\\S+)/);
                if (m) found.push([i, m[1]]);
            });
            return found;
        }""")

    def type_and_check(self, index: int, code: str, timeout_ms: int = 120_000) -> str:
        """Type ``code`` into cell ``index`` (replacing it), run it and the next cell (the check) with
        Shift+Enter as a learner does, and return the check cell's output text once the grade is printed."""
        cells = self.panel.locator(".jp-Notebook .jp-Cell")
        starter, check = cells.nth(index), cells.nth(index + 1)
        starter.scroll_into_view_if_needed()
        starter.locator(".cm-content").click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.insert_text(code)
        count = self.page.evaluate(
            f"() => window.jupyterapp.shell.currentWidget.content.widgets[{index + 1}].model.executionCount")
        self.page.keyboard.press("Shift+Enter")
        self.page.keyboard.press("Shift+Enter")
        self.page.wait_for_function(
            f"""() => {{
                const panel = window.jupyterapp.shell.currentWidget;
                const cell = panel.content.widgets[{index + 1}];
                return cell.model.executionCount !== null && cell.model.executionCount !== {count or 'null'}
                    && panel.sessionContext.session.kernel.status === 'idle'
                    && /✓ passed|✗ not yet/.test(cell.node.textContent);
            }}""", timeout=timeout_ms, polling=200)
        return check.locator(".jp-OutputArea").inner_text()

    def __init__(self, page, server: LabServer, name: str):
        """Open ``name`` in ``page``. A page that already holds this server's JupyterLab (the browser tests keep one
        per worker) opens the lesson from inside it, as the file browser does: 3.1 s to the lesson's idle kernel
        instead of 6.0–6.4 s with a new page loading JupyterLab (three lessons, alone on 2 cores, 2026-12-06)."""
        self.page = page
        self.name = name
        self.console_errors: list[str] = []
        self.page_errors: list[str] = []
        self._listeners = [("console", lambda m: self.console_errors.append(m.text) if m.type == "error" else None),
                           ("pageerror", lambda e: self.page_errors.append(str(e)))]
        for event, listener in self._listeners:
            page.on(event, listener)
        if page.url.startswith(server.url) and page.evaluate("() => Boolean(window.jupyterapp?.shell)"):
            page.evaluate("""async (path) => { await window.jupyterapp.commands.execute('docmanager:open',
                {path, factory: 'Notebook', kernel: {name: 'python3'}}); }""", name)
        else:
            page.goto(server.notebook_url(name))
        page.wait_for_function(
            """(path) => { const w = window.jupyterapp?.shell?.currentWidget;
                return w?.context?.path === path && w.sessionContext?.session?.kernel?.status === 'idle'; }""",
            arg=name, timeout=120_000)
        page.evaluate(_PROBE_JS)
        open_notebooks = page.locator(".jp-NotebookPanel").count()
        assert open_notebooks == 1, f"{name}: expected only this lesson open, found {open_notebooks} notebooks"
        self.panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")

    def close(self) -> None:
        """Close the lesson's tab without the unsaved-changes dialog (its kernel stays: shut it down apart), and stop
        listening to the page for it, so that the page can open the next lesson."""
        self.page.evaluate("""() => { for (const w of [...window.jupyterapp.shell.widgets('main')]) {
            if (w.context) w.context.model.dirty = false;
            w.dispose(); } }""")
        for event, listener in self._listeners:
            self.page.remove_listener(event, listener)

    def run_all_timing_first_verdict(self, timeout_ms: int = 300_000) -> float:
        """Clear the stored outputs, Run All, and return the seconds until the first verdict is in the DOM.

        A verdict is an ``.exportlab-verdict`` element, a line starting with ``.pte`` (the lessons print a
        program's result that way, next to eager's), the runtime refusing an input or a method (``Failed to load
        method …, error: 0x…``), or an output that names one
        (match, diverge, rejected, refused) in or after the first cell that loaded a ``.pte`` ("→ .pte (…)").
        """
        self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        self.page.evaluate(_FIRST_VERDICT_JS)
        self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        self.page.wait_for_function("() => window.__firstVerdict.at !== null", timeout=timeout_ms, polling=100)
        return self.page.evaluate("() => (window.__firstVerdict.at - window.__firstVerdict.start) / 1000")

    def run_all_timing(self, timeout_ms: int = 600_000) -> tuple[float, float]:
        """Clear the outputs, Run All, and return (seconds to the first verdict, seconds until the whole lesson ran)."""
        first = self.run_all_timing_first_verdict(timeout_ms)
        self.run_all(timeout_ms, start=False, polling_ms=100)
        whole = self.page.evaluate("() => (performance.now() - window.__firstVerdict.start) / 1000")
        return first, whole

    def run_all(self, timeout_ms: int = 600_000, start: bool = True, polling_ms: int = 500) -> None:
        """Restart-free 'Run All' (``start=False``: one already started), then wait until every code cell has an
        execution count and the kernel is idle."""
        if start:
            self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        self.page.wait_for_function(
            """() => {
                const panel = window.jupyterapp.shell.currentWidget;
                const done = panel.content.widgets.every(c => c.model.type !== 'code'
                    || c.model.sharedModel.getSource().trim() === '' || c.model.executionCount !== null);
                const busy = panel.content.widgets.some(c => c.model.type === 'code' && c.promptNode
                    && c.promptNode.textContent.includes('*'));
                return done && !busy && panel.sessionContext.session.kernel.status === 'idle';
            }""", timeout=timeout_ms, polling=polling_ms)

    def cell_errors(self) -> list[str]:
        return self.panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").filter(
            has_text="Traceback").all_inner_texts()

    def cut_button_labels(self) -> list[str]:
        """Buttons (toggle options included) whose label does not fit: the learner would read "all but one opera…"."""
        return self.page.evaluate("""() => [...document.querySelectorAll(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jupyter-button')]
            .filter(b => b.offsetParent !== null && b.scrollWidth > b.clientWidth + 1)
            .map(b => b.textContent.trim())""")

    def garbled_progress_lines(self) -> list[str]:
        """Progress lines whose final state (✓/✗) still shows the tail of an earlier, longer step."""
        texts = self.panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']")
        return [line for text in texts.all_inner_texts() for line in text.splitlines()
                if line[:2] in ("✓ ", "✗ ") and line.rstrip().endswith("…")]

    def widget_errors(self) -> list[str]:
        texts = self.panel.locator(".jp-OutputArea-output").filter(has_text="Error displaying widget").all_inner_texts()
        widget_console = [t for t in self.console_errors
                          if any(k in t.lower() for k in ("widget", "comm", "model not found", "manager"))]
        return texts + widget_console + self.page_errors

    def interact(self, target, action) -> float:
        """Run ``action()`` (a learner's input) and wait for ``target`` (an output element) to change.

        Returns the time in ms from the input event to the DOM change, measured in the page.
        """
        handle = target.element_handle()
        self.page.evaluate(_ARM_JS, handle)
        action()
        self.page.wait_for_function("() => window.__exportlab.changed !== null", timeout=30_000)
        return self.page.evaluate("() => window.__exportlab.changed - window.__exportlab.event")
