"""The explorer's views in a notebook cell or a standalone HTML file.

The pictures are drawn by the explorer's own TypeScript views (web/src/views), built into one
self-contained script, ``_web/headscope-embed.js`` (web/vite.embed.config.ts; ``make web-embed``).
A page carries that script and the data as a JSON payload (``"headscope.embed/1"``, described in
web/src/lib/embedded.ts): the run document of ``Result.json()`` and the attention
[layer, head, q, k] as base64 float32, with the core's role catalogue and catalogue of statistics
(what GET /api/model serves: role colours, the statistics' labels and help texts). Nothing is fetched: the page works offline. What needs the
model itself (ablation, generation, the W_O decomposition, other texts) says so on the page.

    show(result, view="layer")          display object for Jupyter (an iframe holding the page)
    save_html(result, "run.html")       one standalone HTML file
    show_attention(attn, tokens)        any attention [L, H, T, T], statistics by headscope
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

EMBED_SCHEMA = "headscope.embed/1"
VIEWS = ("layer", "model", "head", "lines", "projection", "compare")
BUNDLE = Path(__file__).with_name("_web") / "headscope-embed.js"
# How far a row of attention may sum from 1 (float32 softmax, or float16 from a framework).
ROW_SUM_TOLERANCE = 1e-2
# Largest attention tensor a page embeds (float32 bytes; the page holds 4/3 of it as base64): 32 MiB
# is e.g. SmolLM2 (30 × 9 heads) at 128 tokens with room to spare, and a notebook still opens
# quickly; longer texts belong in `headscope serve`, which sends one layer at a time.
MAX_EMBED_BYTES = 32 << 20


class View:
    """What show() returns: Jupyter displays it (``_repr_html_``); ``html`` is the whole page."""

    def __init__(self, page: str, height: int):
        self.html = page
        self.height = height

    def _repr_html_(self) -> str:
        # An iframe keeps the explorer's stylesheet and element ids apart from the notebook's
        # and from other cells; srcdoc holds the whole page, so nothing is fetched.
        return (
            f'<iframe class="headscope-view" srcdoc="{html.escape(self.html, quote=True)}" '
            f'style="width: 100%; height: {self.height}px; border: 0" '
            f'title="headscope explorer"></iframe>'
        )

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.html, encoding="utf-8")
        return path


def _bundle() -> str:
    if not BUNDLE.is_file():
        raise FileNotFoundError(
            f"{BUNDLE}: the explorer's embedded script is missing; build it with "
            "`make web-embed` (or `npm run build:embed` in web/)"
        )
    return BUNDLE.read_text(encoding="utf-8")


def _check_view(view: str) -> None:
    if view not in VIEWS:
        raise ValueError(f"view {view!r} is not one of {', '.join(VIEWS)}")


def _attention_json(attention: np.ndarray) -> dict:
    a = np.ascontiguousarray(attention, dtype="<f4")
    if a.nbytes > MAX_EMBED_BYTES:
        L, H, T, _ = a.shape
        raise ValueError(f"attention [{L}, {H}, {T}, {T}] is {a.nbytes / 2**20:.1f} MiB of float32, over the "
                         f"{MAX_EMBED_BYTES >> 20} MiB a page embeds (headscope.views.MAX_EMBED_BYTES); "
                         "show a shorter text, or open it in `headscope serve`")
    return {"shape": list(a.shape), "dtype": "float32", "data": base64.b64encode(a.tobytes()).decode("ascii")}


def _catalogue(name: str) -> list | None:
    """A catalogue of GET /api/model (``_core.role_catalogue()``: role names and colours;
    ``_core.statistics_catalogue()``: the statistics' labels and help texts), when the extension
    offers it; without the roles the page names them in one neutral colour."""
    try:
        from . import _core

        return json.loads(getattr(_core, name)())
    except (ImportError, AttributeError):
        return None


def _with_catalogue(data: dict) -> dict:
    out = dict(data)
    for key, name in (("roles", "role_catalogue"), ("statistics_catalogue", "statistics_catalogue")):
        catalogue = _catalogue(name)
        if catalogue is not None:
            out[key] = catalogue
    return out


def payload(result: Any, view: str = "layer", *, layer: int = 0, head: int = 0) -> dict:
    """The page's data for a Result (``json()`` and ``attention``), or a payload dict as it is."""
    _check_view(view)
    if isinstance(result, dict):
        if result.get("schema") != EMBED_SCHEMA:
            raise ValueError(f"a payload dict needs schema {EMBED_SCHEMA!r}, got {result.get('schema')!r}")
        return {**result, "view": view, "layer": layer, "head": head}
    if not (callable(getattr(result, "json", None)) and hasattr(result, "attention")):
        raise TypeError("show() takes a headscope Result (with json() and attention) or a payload dict")
    run = json.loads(result.json())
    if run.get("streamed"):
        raise ValueError("this run's maps were streamed (a long text): there is no dense attention to show")
    attention = np.asarray(result.attention)
    expected = (run["model"]["n_layer"], run["model"]["n_head"], run["n_tokens"], run["n_tokens"])
    if attention.shape != expected:
        raise ValueError(f"Result.attention has shape {attention.shape}, the run says {expected}")
    return _with_catalogue({"schema": EMBED_SCHEMA, "run": run, "attention": _attention_json(attention),
                            "view": view, "layer": layer, "head": head})


def page(data: dict) -> str:
    """One HTML document holding the explorer's script and `data`."""
    # "</" cannot end the script elements early once written as "<\/" (valid JSON and JS).
    payload_text = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    script = _bundle().replace("</script", "<\\/script")
    title = html.escape(f"headscope · {data['run'].get('model', {}).get('name', 'attention')}")
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n"
        "</head>\n<body>\n<div id=\"headscope-root\"></div>\n"
        f"<script type=\"application/json\" id=\"headscope-payload\">{payload_text}</script>\n"
        f"<script>{script}</script>\n</body>\n</html>\n"
    )


def show(result: Any, view: str = "layer", *, layer: int = 0, head: int = 0, height: int = 720) -> View:
    """The explorer's `view` of a Result (or payload) as a Jupyter display object."""
    return View(page(payload(result, view, layer=layer, head=head)), height)


def save_html(result: Any, path: str | Path, view: str = "layer", *, layer: int = 0, head: int = 0) -> Path:
    """Writes one standalone HTML file (works offline, no server) and returns its path."""
    return View(page(payload(result, view, layer=layer, head=head)), 0).save(path)


def _as_array(attn: Any) -> np.ndarray:
    """numpy [L, H, T, T] or [H, T, T], or transformers' tuple of per-layer [1, H, T, T] tensors."""
    if isinstance(attn, (tuple, list)):
        if not attn:
            raise ValueError("attention is an empty sequence: expected one [1, H, T, T] tensor per layer")
        layers = []
        for i, t in enumerate(attn):
            if hasattr(t, "detach"):  # a torch tensor: torch is imported by whoever made it
                t = t.detach().float().cpu().numpy()
            t = np.asarray(t)
            if t.ndim != 4 or t.shape[0] != 1:
                raise ValueError(f"attention layer {i} has shape {tuple(t.shape)}, expected [1, H, T, T] (batch of one)")
            layers.append(t[0])
        shapes = {x.shape for x in layers}
        if len(shapes) != 1:
            raise ValueError(f"attention layers differ in shape: {sorted(shapes)}")
        return np.stack(layers)
    if hasattr(attn, "detach"):
        attn = attn.detach().float().cpu().numpy()
    a = np.asarray(attn)
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4:
        raise ValueError(f"attention has shape {a.shape}, expected [L, H, T, T] or [H, T, T]")
    return a


def check_attention(attn: Any, n_tokens: int) -> np.ndarray:
    """The attention as float32 [L, H, T, T], after checking it is one: ValueError otherwise."""
    a = _as_array(attn)
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"attention has dtype {a.dtype}, expected floating-point weights")
    L, H, Tq, Tk = a.shape
    if Tq != Tk:
        raise ValueError(f"attention maps are {Tq} × {Tk}, expected square [T, T] (self-attention)")
    if Tq != n_tokens:
        raise ValueError(f"attention covers {Tq} positions but {n_tokens} tokens were given")
    if L == 0 or H == 0 or Tq == 0:
        raise ValueError(f"attention has an empty axis: shape {a.shape}")
    a = a.astype(np.float32)
    if not np.isfinite(a).all():
        raise ValueError("attention holds NaN or infinite values")
    if a.min() < 0 or a.max() > 1 + ROW_SUM_TOLERANCE:
        raise ValueError(f"attention weights range over [{a.min():.4g}, {a.max():.4g}], expected probabilities in [0, 1]")
    sums = a.sum(axis=-1)
    worst = np.unravel_index(np.abs(sums - 1).argmax(), sums.shape)
    if abs(sums[worst] - 1) > ROW_SUM_TOLERANCE:
        l, h, q = (int(i) for i in worst)
        raise ValueError(f"attention row sums must be 1 (softmax over keys, the last axis); "
                         f"layer {l} head {h} query {q} sums to {sums[worst]:.4g}")
    return a


def show_attention(attn: Any, tokens: Sequence[str], *, view: str = "layer", special: Sequence[bool] | None = None,
                   layer: int = 0, head: int = 0, height: int = 720, path: str | Path | None = None) -> View:
    """The explorer's views of any attention: numpy [L, H, T, T] or [H, T, T], or the tuple of
    [1, H, T, T] tensors transformers returns with output_attentions=True. headscope computes
    each head's statistics and roles (``_core.analyse_attention``); with `path`, also saved."""
    _check_view(view)
    if view == "projection":
        raise ValueError("view 'projection' draws the model's W_O, which attention from elsewhere does not have")
    tokens = [str(t) for t in tokens]
    a = check_attention(attn, len(tokens))
    if special is not None:
        special = [bool(s) for s in special]
        if len(special) != len(tokens):
            raise ValueError(f"special has {len(special)} flags for {len(tokens)} tokens")
    from . import _core

    # The core's run document of these maps ("headscope.maps/1", shaped like /api/run's): the
    # tokens joined by spaces into the text, each its own word, every head's statistics and roles.
    run = json.loads(_core.analyse_attention(a, tokens, special))
    data = _with_catalogue({"schema": EMBED_SCHEMA, "run": run, "attention": _attention_json(a), "view": view,
                            "layer": layer, "head": head})
    v = View(page(data), height)
    if path is not None:
        v.save(path)
    return v
