"""The explorer's views in notebooks and standalone HTML (python/headscope/views.py).

Data: a real run of the default model through the installed package. The browser checks open the pages in Debian's Chromium (web/e2e/embed.mjs):
heatmaps drawn, and the hover value equal to the array's. Screenshots: web/test-results/embed-*.png.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import MINILM, ROOT, THREADS

from headscope import views

TEXT = "The cat sat on the mat because it was tired."
RESULTS = ROOT / "web" / "test-results"
# The cell the browser hovers: layer, head, query, key.
CELL = (1, 3, 2, 5)

needs_bundle = pytest.mark.skipif(not views.BUNDLE.is_file(), reason="no embedded bundle: make web-embed")


@pytest.fixture(scope="module")
def result(minilm):
    return minilm.run(TEXT)


def payload_of(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="headscope-payload">(.*?)</script>', page, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def browser_check(checks: list[dict], tmp_path: Path) -> list[dict]:
    """Runs web/e2e/embed.mjs on the pages; returns its per-page results."""
    spec = tmp_path / "checks.json"
    spec.write_text(json.dumps(checks))
    out = subprocess.run(["node", "e2e/embed.mjs", str(spec)], cwd=ROOT / "web", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def assert_drawn(results: list[dict], expected: list[float | None], min_ink: float = 0.5) -> None:
    """Each page drew without errors, its canvas at least `min_ink` inked, and where a value is
    expected the tooltip showed it (to the 4 decimals it prints)."""
    assert len(results) == len(expected)
    for r, e in zip(results, expected):
        assert r["errors"] == [], r
        assert not r["ready"].startswith("error"), r
        assert r["inked"] > min_ink * r["total"], f"heatmap mostly blank: {r}"
        if e is not None:
            assert r["shown"] is not None, r["tooltip"]
            assert abs(float(r["shown"]) - e) <= 5.1e-5, r


@needs_bundle
def test_page_carries_the_run_and_its_attention(result, tmp_path):
    path = views.save_html(result, tmp_path / "run.html", view="head", layer=2, head=4)
    data = payload_of(path.read_text())
    assert data["schema"] == views.EMBED_SCHEMA and (data["view"], data["layer"], data["head"]) == ("head", 2, 4)
    assert data["run"] == json.loads(result.json())
    a = data["attention"]
    decoded = np.frombuffer(base64.b64decode(a["data"]), "<f4").reshape(a["shape"])
    np.testing.assert_array_equal(decoded, result.attention)
    # Self-contained: the script is inline and nothing is loaded from elsewhere.
    page = path.read_text()
    assert "<script src" not in page and "<link" not in page and "headscope-embed" not in page.split("<script>")[0]


@needs_bundle
def test_show_is_an_iframe_holding_the_page(result):
    v = views.show(result, "model", height=500)
    out = v._repr_html_()
    assert out.startswith('<iframe class="headscope-view" srcdoc="') and "height: 500px" in out
    assert "&lt;script type=&quot;application/json&quot;" in out  # the page, escaped into srcdoc
    with pytest.raises(ValueError, match="view 'heads' is not one of"):
        views.show(result, "heads")


def test_page_refuses_attention_over_its_budget(result, monkeypatch):
    monkeypatch.setattr(views, "MAX_EMBED_BYTES", result.attention.nbytes - 1)
    with pytest.raises(ValueError, match=r"attention \[6, 12, 13, 13\] is 0.0 MiB of float32, over the 0 MiB"):
        views.save_html(result, "/nonexistent/never-written.html")


def test_show_attention_refuses_what_is_not_attention():
    tokens = ["a", "b", "c"]
    good = np.full((2, 3, 3), 1 / 3, np.float32)
    with pytest.raises(ValueError, match=r"shape \(3, 3\), expected \[L, H, T, T\] or \[H, T, T\]"):
        views.check_attention(good[0], 3)
    with pytest.raises(ValueError, match="covers 3 positions but 4 tokens"):
        views.check_attention(good, 4)
    with pytest.raises(ValueError, match="dtype int64"):
        views.check_attention(np.ones((1, 1, 3, 3), np.int64), 3)
    with pytest.raises(ValueError, match="3 × 2, expected square"):
        views.check_attention(np.full((1, 1, 3, 2), 0.5, np.float32), 3)
    bad = good.copy()
    bad[1, 2] = [0.5, 0.5, 0.5]
    with pytest.raises(ValueError, match="layer 0 head 1 query 2 sums to 1.5"):
        views.check_attention(bad, 3)
    nan = good.copy()
    nan[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        views.check_attention(nan, 3)
    with pytest.raises(ValueError, match=r"layer 1 has shape \(2, 2, 3, 3\), expected \[1, H, T, T\]"):
        views.check_attention((good[None, None][0], np.stack([good, good])[None][0]), 3)
    with pytest.raises(ValueError, match="special has 2 flags for 3 tokens"):
        views.show_attention(good, tokens, special=[True, False])
    with pytest.raises(ValueError, match="view 'projection' draws the model's W_O"):
        views.show_attention(good, tokens, view="projection")
    assert views.check_attention(good.astype(np.float64), 3).dtype == np.float32


@needs_bundle
def test_pages_draw_heatmaps_with_the_arrays_values(result, tmp_path):
    """save_html's file and show()'s notebook output in Chromium: drawn, hover = array value."""
    RESULTS.mkdir(exist_ok=True)
    layer, head, q, k = CELL
    standalone = views.save_html(result, tmp_path / "standalone.html", view="layer", layer=layer, head=head)
    cell = tmp_path / "cell.html"
    cell.write_text("<!doctype html><html><body>" + views.show(result, "layer", layer=layer, head=head)._repr_html_() + "</body></html>")
    n = result.attention.shape[-1]
    checks = [{"file": str(f), "frame": frame, "layer": layer, "head": head, "q": q, "k": k, "n": n,
               "expected": float(result.attention[layer, head, q, k]), "shot": str(RESULTS / f"embed-{name}.png")}
              for f, frame, name in ((standalone, False, "save-html"), (cell, True, "show"))]
    assert_drawn(browser_check(checks, tmp_path), [c["expected"] for c in checks])


@needs_bundle
def test_show_attention_from_transformers_tuple(result, tmp_path):
    """Bring your own attention: transformers' tuple of [1, H, T, T] tensors of the same text."""
    torch = pytest.importorskip("torch")
    layers = tuple(torch.from_numpy(result.attention[l][None].copy()) for l in range(result.attention.shape[0]))
    run = json.loads(result.json())
    tokens = [t["text"] for t in run["tokens"]]
    special = [t["special"] for t in run["tokens"]]
    v = views.show_attention(layers, tokens, special=special, view="layer", layer=CELL[0], head=CELL[1], path=tmp_path / "byo.html")
    data = payload_of(v.html)
    # The statistics are headscope's own, computed from the maps alone; they equal the run's (the
    # same maps). Roles may differ: maps from elsewhere have no probe or corpus evidence.
    assert data["run"]["n_tokens"] == len(tokens) and len(data["run"]["heads"]) == len(run["heads"])
    for mine, theirs in zip(data["run"]["heads"], run["heads"]):
        assert (mine["layer"], mine["head"]) == (theirs["layer"], theirs["head"])
        for key in ("entropy", "max_attention", "sink_mass", "prev_token_mass"):
            if key in theirs["stats"]:
                assert mine["stats"][key] == pytest.approx(theirs["stats"][key], abs=1e-6), key
        assert mine["roles"]["primary"]["id"]
    assert [t["special"] for t in data["run"]["tokens"]] == special
    layer, head, q, k = CELL
    check = {"file": str(tmp_path / "byo.html"), "frame": False, "layer": layer, "head": head, "q": q, "k": k,
             "n": len(tokens), "expected": float(result.attention[layer, head, q, k]), "shot": str(RESULTS / "embed-show-attention.png")}
    assert_drawn(browser_check([check], tmp_path), [check["expected"]])
