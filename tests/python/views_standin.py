"""A stand-in for the headscope package while its extension (headscope._core) is not built in
this checkout: Model.run() calls the real `headscope run --json --npy` binary, so every array and
statistic is the engine's own, never a hand-made pattern. Used by test_views.py and, until the
package lands, by the notebook runner (test_notebook.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))


def binary() -> str:
    return os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))


class StandInResult:
    def __init__(self, run_json: str, attention: np.ndarray):
        self._json = run_json
        self.attention = attention  # float32 [layer, head, q, k]
        self.tokens = [t["text"] for t in json.loads(run_json)["tokens"]]

    def json(self) -> str:
        return self._json

    def stats_frame(self):
        import pandas as pd

        heads = json.loads(self._json)["heads"]
        rows = [{"layer": h["layer"], "head": h["head"], "role": h["roles"]["primary"]["id"],
                 **{k: v for k, v in h["stats"].items() if not isinstance(v, dict)}} for h in heads]
        return pd.DataFrame(rows)

    def show(self, view="layer", **kw):
        from headscope import views

        return views.show(self, view, **kw)

    def save_html(self, path, **kw):
        from headscope import views

        return views.save_html(self, path, **kw)


_RUNS: list[StandInResult] = []


class StandInModel:
    def __init__(self, path, *, threads=None, strict=False):
        self.path = str(path)
        self.threads = threads or 2

    def run(self, text: str) -> StandInResult:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([binary(), "run", "-m", self.path, "-t", text, "--json", f"{d}/run.json",
                            "--npy", f"{d}/npy", "-q", "--threads", str(self.threads)], check=True)
            result = StandInResult(Path(d, "run.json").read_text(), np.load(f"{d}/npy/attentions.npy"))
        _RUNS.append(result)
        return result


def analyse_attention(attention, tokens, special=None) -> str:
    """The heads of the stand-in run whose maps these are (within float32 noise of another
    framework's forward pass); the real analyse_attention computes them for any maps."""
    for r in reversed(_RUNS):
        if r.attention.shape == attention.shape and np.allclose(r.attention, attention, atol=1e-4):
            return json.dumps(json.loads(r.json())["heads"])
    raise NotImplementedError("the stand-in analyses only the maps of runs it made; build headscope._core")


def install(monkeypatch=None):
    """Makes `import headscope` offer load/show/save_html/show_attention through the stand-in
    (in a pytest process, pass its monkeypatch so that the stand-in leaves with the test)."""
    import headscope
    from headscope import views

    core = types.ModuleType("headscope._core")
    core.analyse_attention = analyse_attention
    setitem = monkeypatch.setitem if monkeypatch else (lambda d, k, v: d.__setitem__(k, v))
    setattr_ = monkeypatch.setattr if monkeypatch else setattr
    setitem(sys.modules, "headscope._core", core)
    for name, value in (("_core", core), ("load", StandInModel), ("show", views.show),
                        ("save_html", views.save_html), ("show_attention", views.show_attention)):
        setattr_(headscope, name, value, raising=False) if monkeypatch else setattr_(headscope, name, value)
    return headscope
