"""examples/headscope_tour.ipynb executed in a real Jupyter kernel (nbclient + ipykernel), then
its rendered outputs opened in Debian's Chromium: every show() cell and the save_html file draw
their heatmaps, and hovering a cell shows the value of the array the page carries."""

from __future__ import annotations

import base64
import html
import os
import re
from pathlib import Path

import numpy as np
import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

from test_views import RESULTS, assert_drawn, browser_check, payload_of  # noqa: E402
from conftest import ROOT  # noqa: E402

from headscope import views  # noqa: E402

NOTEBOOK = ROOT / "examples" / "headscope_tour.ipynb"
# The query and key hovered in each drawn page.
Q, K = 2, 5


@pytest.mark.skipif(not views.BUNDLE.is_file(), reason="no embedded bundle: make web-embed")
def test_tour_notebook_runs_and_its_views_draw(tmp_path, monkeypatch):
    # The kernel works in tmp_path (where save_html writes) and inherits the model's path.
    monkeypatch.setenv("HEADSCOPE_MODEL", os.environ.get("HEADSCOPE_MODEL", str(ROOT / "models" / "all-MiniLM-L6-v2")))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute(
        cwd=str(tmp_path))
    RESULTS.mkdir(exist_ok=True)
    nbformat.write(nb, RESULTS / "headscope_tour.executed.ipynb")

    pages = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            rendered = out.get("data", {}).get("text/html", "")
            if 'class="headscope-view"' in rendered:
                f = tmp_path / f"cell{i}.html"
                f.write_text(f"<!doctype html><html><body>{rendered}</body></html>")
                srcdoc = html.unescape(re.search(r'srcdoc="(.*?)"', rendered, re.S).group(1))
                pages.append((f, True, payload_of(srcdoc), f"notebook-cell{i}"))
    saved = tmp_path / "headscope_tour.html"
    assert saved.is_file(), "the notebook's save_html cell wrote no file"
    pages.append((saved, False, payload_of(saved.read_text()), "notebook-save-html"))
    assert len(pages) == 4, [p[3] for p in pages]  # three show() cells and the saved file

    # The layer views are hovered; the others (head panel, model grid) checked for a drawn canvas.
    canvases = {"head": "#head-panel canvas", "model": "#model-grid"}
    checks, expected = [], []
    for f, frame, data, name in pages:
        a = data["attention"]
        attention = np.frombuffer(base64.b64decode(a["data"]), "<f4").reshape(a["shape"])
        layer, head, view = data["layer"], data["head"], data["view"]
        check = {"file": str(f), "frame": frame, "head": head, "shot": str(RESULTS / f"embed-{name}.png")}
        if view == "layer":
            check.update(q=Q, k=K, n=attention.shape[-1], expected=float(attention[layer, head, Q, K]))
        else:
            check["canvas"] = canvases[view]
        checks.append(check)
        expected.append(check.get("expected"))
    assert sorted(d["view"] for _, _, d, _ in pages) == ["head", "layer", "layer", "model"]
    assert_drawn(browser_check(checks, tmp_path), expected, min_ink=0.1)
