"""The logit lens (`headscope lens`), one head's lens (`headscope lens --head`) and direct logit
attribution through sandwich norms (`headscope run --dla`) against transformers with forward hooks.

One unpatched forward pass per prompt records, through hooks on the Hugging Face modules, the
residual stream entering every layer and entering the final norm, the input of every o_proj (the
heads' outputs side by side), what the attention block hands to its output norm (Gemma 2/3 and
OLMo 2 `post_attention_layernorm`) and what each feed-forward block adds to the stream. From these:

  lens row l   model.model.norm then lm_head (then the final soft-cap, if any) applied by the
               model's own modules to the stream entering layer l (row n_layer: entering the final
               norm, which is the model's own logits);
  head effect  head h's slice of the o_proj input times the matching columns of o_proj.weight;
               on sandwich models times the output norm's gain over the rms of the whole o_proj
               output; then times the final norm's gain over the rms of the final residual; then
               the unembedding. Float64, before any soft-cap. Each norm's gain is read from the
               module itself (what it makes of a vector of ones), so Gemma's 1 + weight needs no
               special case; the frozen-scale formula is checked against the module's output.

Models: SmolLM2-135M (Q4_1 GGUF, 9 query heads over 3 key/value heads), Gemma 3 270M (Q4_K_M GGUF,
4 query heads over one, sandwich norms), and the tiny random Gemma 2 (attention and final soft-caps)
and OLMo 2 (an output norm after each block) of the goldens. Logits and effects agree to 1e-4
absolute, relaxed to 1e-6 of the row's largest |logit| where that is over 100: the lens's first row
on Gemma 3 270M reaches 880, where the float32 reference itself is 2.4e-4 away from the same
readout in float64. Probabilities agree to 1e-5. Measured (this machine, 2 threads): lens logits
3.4e-5 on SmolLM2 and 2.4e-4 (2.8e-7 of the row's largest) on Gemma 3 270M; head effects 2.4e-6
and 7.4e-6; attribution parts 1.4e-5 and Σ parts against the logit 2.3e-5; the tiny models 5e-6.
"""
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import patch_reference as pr  # noqa: E402
import test_cli_errors as cli  # noqa: E402

torch.set_num_threads(2)
ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
GOLDENS = pathlib.Path(os.environ.get("HEADSCOPE_GOLDENS", ROOT / "build" / "goldens"))
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_270M = ROOT / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"
TOL = 1e-4
PROB_TOL = 1e-5
IOI = "When Mary and John went to the store, John gave a drink to"
NAMES = [" Mary", " John"]
MIDDLE = 7  # " the" before " store" in both real models' tokens
TINY_TEXT = "Mary and John went in, John gave it to"
TINY_NAMES = [" the", " a"]  # whole-word tokens of the tiny models' 320-token vocabulary


def tol_of(scale):
    """The tolerance on a logit or effect in a row whose largest |value| is `scale`."""
    return max(TOL, 1e-6 * scale)


# ---------------------------------------------------------------------- the reference


def rms(x, eps):
    return torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def rms_norm_of(norm, width):
    """(gain [width] float64, eps) of an RMSNorm module: a vector of ones has rms √(1 + eps), so the
    module maps it to gain / √(1 + eps)."""
    eps = getattr(norm, "variance_epsilon", None)
    eps = norm.eps if eps is None else eps
    with torch.no_grad():
        return norm(torch.ones(1, width))[0].double() * math.sqrt(1 + eps), eps


class Decoder:
    """A transformers decoder (patch_reference.Hooked) with what the readouts need in float64: the
    unembedding, each o_proj weight, the final norm's and (sandwich models) every output norm's gain."""

    def __init__(self, hooked, tok, path):
        self.hooked, self.tok, self.path = hooked, tok, path
        self.model, self.base = hooked.model, hooked.base
        width = self.model.config.hidden_size
        self.cap = getattr(self.model.config, "final_logit_softcapping", None)
        self.unembed = self.model.lm_head.weight.detach().double()
        self.w_o = [hooked.proj(l, "o").weight.detach().double() for l in range(hooked.n_layer)]
        self.final_gain, self.final_eps = rms_norm_of(self.base.norm, width)
        self.post = ([rms_norm_of(layer.post_attention_layernorm, width) for layer in hooked.layers]
                     if hooked.sandwich else None)
        self._runs = {}

    def token(self, text):
        ids = pr.encode(self.tok, text, False)
        assert len(ids) == 1, (text, ids)
        return ids[0]

    def run(self, ids):
        if tuple(ids) not in self._runs:
            self._runs[tuple(ids)] = Run(self, ids)
        return self._runs[tuple(ids)]

    def capped(self, z):
        return z if self.cap is None else self.cap * torch.tanh(z / self.cap)


class Run:
    """One forward pass of `ids`, batch row 0, recorded by hooks (float32 as the model computed it):
    resid[l] entering layer l, final entering the final norm, o[l] the o_proj input, block[l] the
    input of the output norm after attention (sandwich models), mlp[l] what the feed-forward block
    adds to the stream; logits the model's output, z = lm_head(norm(final)), the logits before any
    soft-cap."""

    def __init__(self, dec, ids):
        h = dec.hooked
        seen, handles = {}, []

        def keep(key):  # a pre-hook: the module's input
            return lambda m, args: seen.__setitem__(key, args[0][0].detach())

        def entering(l):
            def pre(m, args, kwargs):
                seen[("resid", l)] = (args[0] if args else kwargs["hidden_states"])[0].detach()
            return pre

        for l, layer in enumerate(h.layers):
            handles.append(layer.register_forward_pre_hook(entering(l), with_kwargs=True))
            handles.append(h.proj(l, "o").register_forward_pre_hook(keep(("o", l))))
            handles.append(h.block_output(l, "mlp").register_forward_hook(
                lambda m, args, out, l=l: seen.__setitem__(("mlp", l), out[0].detach())))
            if h.sandwich:
                handles.append(layer.post_attention_layernorm.register_forward_pre_hook(keep(("block", l))))
        handles.append(dec.base.norm.register_forward_pre_hook(keep("final")))
        try:
            with torch.no_grad():
                self.logits = dec.model(input_ids=torch.tensor([list(ids)]), use_cache=False).logits[0]
        finally:
            for handle in handles:
                handle.remove()
        n = h.n_layer
        self.ids = list(ids)
        self.resid = [seen[("resid", l)] for l in range(n)]
        self.o = [seen[("o", l)] for l in range(n)]
        self.mlp = [seen[("mlp", l)] for l in range(n)]
        self.block = [seen[("block", l)] for l in range(n)] if h.sandwich else None
        self.final = seen["final"]
        with torch.no_grad():
            normed = dec.base.norm(self.final)
            self.z = dec.model.lm_head(normed).double()
        # The model's logits are its final norm and unembedding of the recorded stream, capped.
        assert (dec.capped(self.z) - self.logits.double()).abs().max() <= 1e-5 * max(1.0, self.z.abs().max())
        # The frozen-scale form of the final norm that the readouts use is the module's own.
        frozen = self.final.double() * dec.final_gain / rms(self.final.double(), dec.final_eps)
        assert (frozen - normed.double()).abs().max() <= 1e-5 * max(1.0, normed.abs().max())
        self.dec = dec

    def lens_rows(self, p):
        """[n_layer + 1, vocab] float64: each row the model's final norm, lm_head and cap of the stream."""
        dec = self.dec
        x = torch.stack([r[p] for r in self.resid] + [self.final[p]])
        with torch.no_grad():
            rows = dec.capped(dec.model.lm_head(dec.base.norm(x))).double()
        # The last row is the model's own logits.
        assert (rows[-1] - self.logits[p].double()).abs().max() <= 1e-5 * max(1.0, rows[-1].abs().max())
        return rows

    def to_final(self, parts, l, p):
        """Parts [.., D] added at position p by layer l's attention block (l None: added to the
        stream directly) as the final norm's input sees them, every norm's scale frozen at this
        run's own, times the final norm's gain: what dot U_t gives the logit of t."""
        dec = self.dec
        parts = parts.double()
        if l is not None and dec.post is not None:
            gain, eps = dec.post[l]
            parts = parts * gain / rms(self.block[l][p].double(), eps)
        return parts * dec.final_gain / rms(self.final[p].double(), dec.final_eps)

    def heads(self, l, p):
        """[n_head, D]: every head of layer l at p through W_O, then to_final."""
        h = self.dec.hooked
        o = self.o[l][p].double().reshape(h.n_head, h.d_head)
        w = self.dec.w_o[l].reshape(-1, h.n_head, h.d_head)  # [D, H, d]
        return self.to_final(torch.einsum("hd,Dhd->hD", o, w), l, p)

    def head_effect(self, l, head, p):
        """The head's direct effect on every vocabulary logit at p: [vocab] float64."""
        return self.dec.unembed @ self.heads(l, p)[head]


# ---------------------------------------------------------------------- helpers


def headscope(tmp_path, model, *args):
    out = tmp_path / "lens.json"
    cmd = [BIN, "lens", "--model", str(model), *map(str, args), "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return json.loads(out.read_text())


def check_doc_tokens(doc, run, p):
    assert [t["id"] for t in doc["tokens"]] == run.ids, "headscope and transformers read other tokens"
    assert doc["position"] == p and doc["token"]["id"] == run.ids[p]


def check_rank(rank, values, v, tol):
    """rank = the number of entries larger than v, up to entries within tol of v."""
    lo, hi = int((values > v + tol).sum()), int((values > v - tol).sum())
    assert lo <= rank <= hi, (rank, lo, hi)


def check_extremes(ids, values, tol, largest=True):
    """ids are the len(ids) largest (smallest) entries of values, in order, up to near ties."""
    values = values if largest else -values
    picked = values[ids]
    assert len(set(ids)) == len(ids)
    assert (np.diff(picked) <= tol).all(), picked
    rest = values.copy()
    rest[ids] = -np.inf
    assert picked.min() >= rest.max() - tol, (picked.min(), rest.max())


class Worst:
    """The largest error of each kind seen, for the printed summary."""

    def __init__(self):
        self.err = {}

    def add(self, kind, got, want, tol, scale=None):
        """scale: the largest |value| of the row, recorded as the relative error too."""
        e = abs(got - want)
        self.err[kind] = max(self.err.get(kind, 0.0), e)
        if scale is not None and scale > 0:
            self.err[kind + " / row max"] = max(self.err.get(kind + " / row max", 0.0), e / scale)
        assert e <= tol, (kind, got, want, tol)

    def line(self):
        return ", ".join(f"max |Δ {k}| {v:.2e}" for k, v in self.err.items())


# ---------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def smollm2():
    if not SMOLLM2.exists():
        pytest.skip(f"{SMOLLM2} is not linked (scripts/setup.sh)")
    return Decoder(*pr.load_gguf(SMOLLM2), SMOLLM2)


@pytest.fixture(scope="module")
def gemma_270m():
    if not GEMMA_270M.exists():
        pytest.skip(f"{GEMMA_270M} is not linked (scripts/setup.sh)")
    return Decoder(*pr.load_gguf(GEMMA_270M), GEMMA_270M)


_tiny = {}


def tiny(name):
    if name not in _tiny:
        folder = GOLDENS / "decoders" / name
        if not (folder / "config.json").exists():
            pytest.skip(f"{folder} is missing: build the goldens (HEADSCOPE_GOLDENS)")
        _tiny[name] = Decoder(*pr.load_hf(folder), folder)
    return _tiny[name]


@pytest.fixture(params=["smollm2", "gemma_270m"])
def real(request):
    return request.getfixturevalue(request.param)


# ---------------------------------------------------------------------- the logit lens


def check_lens(dec, doc, run, p, names, worst):
    rows = run.lens_rows(p)
    n = dec.hooked.n_layer
    assert doc["schema"] == "headscope.lens/1" and len(doc["layers"]) == n + 1
    check_doc_tokens(doc, run, p)
    followed = [dec.token(t) for t in names]
    for l, layer in enumerate(doc["layers"]):
        assert layer["layer"] == l
        row = rows[l].numpy()
        probs = torch.softmax(rows[l], -1).numpy()
        scale = np.abs(row).max()
        tol = tol_of(scale)
        check_extremes([e["id"] for e in layer["top"]], row, tol)
        assert [e["id"] for e in layer["followed"]] == followed
        for e in layer["top"] + layer["followed"]:
            worst.add("logit", e["logit"], row[e["id"]], tol, scale)
            worst.add("probability", e["probability"], probs[e["id"]], PROB_TOL)
            check_rank(e["rank"], row, row[e["id"]], tol)


@pytest.mark.parametrize("position", [None, MIDDLE])
def test_lens_rows_real(tmp_path, real, position):
    """Every row of the lens at the last and a middle position of the IOI prompt, top 10 and both
    names followed."""
    args = ["--text", IOI, "--top-k", 10] + [a for t in NAMES for a in ("--token", t)]
    doc = headscope(tmp_path, real.path, *args, *(["--position", position] if position is not None else []))
    ids = pr.encode(real.tok, IOI)
    run = real.run(ids)
    worst = Worst()
    check_lens(real, doc, run, len(ids) - 1 if position is None else position, NAMES, worst)
    print(f"\n{real.path.stem} lens at position {doc['position']}: {worst.line()}")


# ---------------------------------------------------------------------- one head's lens


def check_head_lens(dec, doc, run, l, head, p, names, worst):
    h = dec.hooked
    assert doc["schema"] == "headscope.head_lens/1"
    assert (doc["layer"], doc["head"], doc["kv_head"]) == (l, head, head // h.group)
    check_doc_tokens(doc, run, p)
    effect = run.head_effect(l, head, p).numpy()
    z = run.z[p].numpy()
    scale = np.abs(effect).max()
    tol = tol_of(scale)
    assert [e["id"] for e in doc["followed"]] == [dec.token(t) for t in names]
    check_extremes([e["id"] for e in doc["promoted"]], effect, tol)
    check_extremes([e["id"] for e in doc["suppressed"]], effect, tol, largest=False)
    for e in doc["promoted"] + doc["suppressed"] + doc["followed"]:
        worst.add("effect", e["logit"], effect[e["id"]], tol, scale)
        worst.add("model_logit", e["model_logit"], z[e["id"]], tol_of(np.abs(z).max()))
        check_rank(e["rank"], effect, effect[e["id"]], tol)


# (layer, head, position): early, middle and late heads, each key/value group of SmolLM2, every
# head of one of Gemma's global layers (5) and heads of its sliding-window layers.
SMOLLM2_HEADS = [(0, 0, None), (3, 4, None), (14, 8, None), (23, 3, None), (23, 3, MIDDLE), (29, 5, None)]
GEMMA_HEADS = [(0, 1, None), (5, 0, None), (5, 3, None), (9, 2, MIDDLE), (12, 1, None), (17, 2, None)]


@pytest.mark.parametrize("name,heads", [("smollm2", SMOLLM2_HEADS), ("gemma_270m", GEMMA_HEADS)])
def test_head_lens_real(tmp_path, request, name, heads):
    dec = request.getfixturevalue(name)
    ids = pr.encode(dec.tok, IOI)
    run = dec.run(ids)
    worst = Worst()
    for l, head, position in heads:
        args = ["--text", IOI, "--head", f"{l}.{head}", "--top-k", 10] + [a for t in NAMES for a in ("--token", t)]
        doc = headscope(tmp_path, dec.path, *args, *(["--position", position] if position is not None else []))
        check_head_lens(dec, doc, run, l, head, len(ids) - 1 if position is None else position, NAMES, worst)
    print(f"\n{dec.path.stem} head lens, {len(heads)} heads: {worst.line()}")


# ---------------------------------------------------------------------- direct logit attribution


def check_dla(dec, dla_path, run, worst):
    """Every attribution of headscope's --dla file: Σ parts against the model's logit (target −
    contrast, before any cap), every head's part and the embeddings' and MLPs' against the hooks."""
    doc = json.loads(dla_path.read_text())
    assert doc["schema"] == "headscope.dla/1"
    ids, T, h = run.ids, len(run.ids), dec.hooked
    rows = doc["attributions"]
    assert len(rows) == 2 * T and {a["position"] for a in rows} == set(range(T))
    z = run.z.numpy()
    for a in rows:
        p, t, c = a["position"], a["target"], a["contrast"]
        assert t == (ids[p + 1] if p + 1 < T else int(z[p].argmax()))
        u = dec.unembed[t] - (dec.unembed[c] if c is not None else 0.0)
        ref_logit = z[p, t] - (z[p, c] if c is not None else 0.0)
        heads = np.array([(run.heads(l, p) @ u).numpy() for l in range(h.n_layer)])
        assert np.array(a["heads"]).shape == (h.n_layer, h.n_head)
        for got, want in zip(np.ravel(a["heads"]), heads.ravel()):
            worst.add("head", got, want, TOL)
        worst.add("embeddings", a["embeddings"], float(run.to_final(run.resid[0][p], None, p) @ u), TOL)
        for l in range(h.n_layer):
            worst.add("mlp", a["mlp"][l], float(run.to_final(run.mlp[l][p], None, p) @ u), TOL)
        parts = a["embeddings"] + np.sum(a["heads"]) + np.sum(a["attention_bias"]) + np.sum(a["mlp"]) \
            + a["final_norm_bias"]
        worst.add("Σ parts − logit", parts, ref_logit, TOL)
        worst.add("rest", a["rest"], 0.0, TOL)


def headscope_dla(tmp_path, model, text, contrast):
    path = tmp_path / "dla.json"
    cmd = [BIN, "run", "--model", str(model), "--text", text, "--no-probe", "--quiet", "--dla", str(path),
           "--dla-contrast", str(contrast)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return path


def test_dla_real(tmp_path, real):
    """Every position of the IOI prompt, the next token alone and against " John"."""
    ids = pr.encode(real.tok, IOI)
    run = real.run(ids)
    worst = Worst()
    check_dla(real, headscope_dla(tmp_path, real.path, IOI, real.token(" John")), run, worst)
    print(f"\n{real.path.stem} logit attribution: {worst.line()}")


# ---------------------------------------------------------------------- tiny Gemma 2 and OLMo 2


@pytest.mark.parametrize("name", ["gemma2", "olmo2"])
def test_tiny_sandwich_models(tmp_path, name):
    """Gemma 2 (attention and final soft-caps, sliding windows, sandwich norms) and OLMo 2 (an
    output norm after each block): the lens at two positions, every head's lens at the last, and
    the logit attribution of every position."""
    dec = tiny(name)
    ids = pr.encode(dec.tok, TINY_TEXT)
    run = dec.run(ids)
    follow = [a for t in TINY_NAMES for a in ("--token", t)]
    lens, heads, dla = Worst(), Worst(), Worst()
    for p in (len(ids) - 1, 10):
        doc = headscope(tmp_path, dec.path, "--text", TINY_TEXT, "--position", p, "--top-k", 5, *follow)
        check_lens(dec, doc, run, p, TINY_NAMES, lens)
    for l in range(dec.hooked.n_layer):
        for head in range(dec.hooked.n_head):
            doc = headscope(tmp_path, dec.path, "--text", TINY_TEXT, "--head", f"{l}.{head}", "--top-k", 5, *follow)
            check_head_lens(dec, doc, run, l, head, len(ids) - 1, TINY_NAMES, heads)
    check_dla(dec, headscope_dla(tmp_path, dec.path, TINY_TEXT, dec.token(" a")), run, dla)
    print(f"\n{name}: lens {lens.line()}; head lens {heads.line()}; attribution {dla.line()}")


# ---------------------------------------------------------------------- refusals


def test_lens_refuses_an_encoder(tmp_path):
    out = tmp_path / "lens.json"
    proc = cli.run("lens", "--model", cli.MODEL, "--text", "The keys are on the table.", "--json", out)
    cli.assert_clean_error(proc, "encoder", "needs a decoder")
    assert not out.exists()


@pytest.mark.parametrize("args,fragments", [
    (["--head", "99.0"], ["99.0", "not a head", "layers 0..29"]),
    (["--head", "3.9"], ["3.9", "not a head", "heads 0..8"]),
    (["--token", " Mary", "--token", " Maryland Johnson"], ["Maryland Johnson", "2 tokens", "one token"]),
    (["--head", "23.3", "--token", " Maryland Johnson"], ["Maryland Johnson", "2 tokens", "one token"]),
], ids=["layer_out_of_range", "head_out_of_range", "token_of_two_tokens", "head_with_token_of_two_tokens"])
def test_lens_refusals(tmp_path, args, fragments):
    if not SMOLLM2.exists():
        pytest.skip(f"{SMOLLM2} is not linked (scripts/setup.sh)")
    out = tmp_path / "lens.json"
    proc = cli.run("lens", "--model", SMOLLM2, "--text", IOI, *args, "--json", out)
    cli.assert_clean_error(proc, *fragments)
    assert not out.exists()
