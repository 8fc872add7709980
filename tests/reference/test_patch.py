"""Activation patching (headscope patch) against transformers with forward hooks.

patch_reference.py does every patch of the contract in PyTorch on the Hugging Face model, through
hooks only. Two kinds of tests here:

  - self-checks of the reference (no binary needed): identities that hold whatever the weights,
    e.g. replacing the whole residual stream entering a layer gives the source run's metric,
    replacing every head of a layer equals replacing the attention block's output, q + k + v of a
    head's group equal its outputs, a patch with the base run's own values changes nothing, path
    patching through the residual stream equals the same sum done by hand;
  - `headscope patch --json` against the reference: every result's raw value and the unpatched
    clean and corrupt metrics to 1e-4 absolute, on tiny random models (BERT with the cosine
    metric; Llama with 6 query heads over 2 key/value heads; Gemma 3 with per-head q/k norms,
    sandwich norms and sliding windows; Qwen3; OLMo 2, whose q/k norm spans every head), every
    site in both directions, path patching, all-MiniLM-L6-v2, and the real SmolLM2-135M and
    Gemma 3 270M on IOI pairs. They are skipped while the binary has no `patch` subcommand.

Tests whose name holds "real" load the quantised real decoders (most of their time is
transformers de-quantising the GGUF files).
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import torch
import transformers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import patch_reference as pr  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(2)
ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
GOLDENS = pathlib.Path(os.environ.get("HEADSCOPE_GOLDENS", ROOT / "build" / "goldens"))
MINILM = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))
SMOLLM2 = ROOT / "models" / "SmolLM2-135M-Instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_270M = ROOT / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"
TOL = 1e-4
ALL_SITES = "head,head_position,q,k,v,pattern,resid,attn,mlp"

# The tiny models' byte-level BPE (320 tokens) splits names into letters: the two prompts are
# 24 tokens each (25 with the decoders' BOS). Answers: whole-word tokens of that vocabulary whose
# logit difference moves most between the two prompts for each random model.
TINY_CLEAN = "Mary and John went in, John gave it to"
TINY_CORRUPT = "Anna and Paul went in, Mark gave it to"
TINY = {  # name: (folder under the goldens, encoder, answer, wrong)
    "bert_bare": ("encoders/bert_bare", True, None, None),
    "llama_gqa3": ("decoders/llama_gqa3", False, " the", " for"),
    "gemma3_text": ("decoders/gemma3_text", False, " a", " is"),
    "qwen3": ("decoders/qwen3", False, " is", " be"),
    "olmo2": ("decoders/olmo2", False, " the", " a"),  # q/k norm over the whole projection
}
# IOI pairs for the real decoders, corrupted by three other names; one token per name for both.
IOI = [("When Mary and John went to the store, John gave a drink to",
        "When Alice and Bob went to the store, Carl gave a drink to", " Mary", " John"),
       ("When Tom and James went to the park, James gave a ball to",
        "When Dan and Paul went to the park, Mark gave a ball to", " Tom", " James")]

_loaded = {}


def tiny(name):
    """(Hooked, tokenizer, folder) of a tiny golden model, loaded once."""
    if name not in _loaded:
        folder, encoder = GOLDENS / TINY[name][0], TINY[name][1]
        if not (folder / "config.json").exists():
            pytest.skip(f"{folder} is missing: build the goldens (HEADSCOPE_GOLDENS)")
        _loaded[name] = (*pr.load_hf(folder, encoder), folder)
    return _loaded[name]


def tiny_runs(name, metric=None):
    hooked, tok, _ = tiny(name)
    _, _, answer, wrong = TINY[name]
    pair = pr.make_pair(tok, TINY_CLEAN, TINY_CORRUPT, answer, wrong)
    return hooked, pr.PairRuns(hooked, pair, metric or pr.default_metric(hooked))


def real(path):
    if not path.exists():
        pytest.skip(f"{path} is not linked (scripts/setup.sh)")
    if path not in _loaded:
        _loaded[path] = pr.load_gguf(path)
    return _loaded[path]


# ====================================================================== self-checks of the reference


def close(a, b, tol=1e-5):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


@pytest.mark.parametrize("name", list(TINY))
def test_reference_unpatched_run_is_the_models_own(name):
    """The registered attention function changes nothing by itself: the output and the recorded
    probabilities are those of the model run with transformers' eager attention."""
    hooked, runs = tiny_runs(name)
    folder, encoder = GOLDENS / TINY[name][0], TINY[name][1]
    cls = transformers.AutoModel if encoder else transformers.AutoModelForCausalLM
    model = cls.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(torch.tensor([runs.pair.clean]), output_attentions=True,
                    **({} if encoder else {"use_cache": False}))
    mine = out.last_hidden_state if encoder else out.logits[:, -1]
    assert (mine - runs.clean_out).abs().max() <= 1e-5
    for l, probs in enumerate(out.attentions):
        assert (probs[0] - runs.clean_cache.pattern[l]).abs().max() <= 1e-6
    if not encoder:  # the metrics from the full logits
        logits = out.logits[0, -1].double()
        assert close(runs.clean, float(logits[runs.pair.answer] - logits[runs.pair.wrong]))
    assert not close(runs.clean, runs.corrupt, 1e-2), "the pair must move the metric"


@pytest.mark.parametrize("name", list(TINY))
def test_reference_whole_residual_stream_gives_the_source_metric(name):
    """The residual stream entering any layer, at every position, carries everything: replacing
    it gives the source run's metric exactly (normalised 1 denoising, 0 noising). One position
    alone does not (the test could fail)."""
    hooked, runs = tiny_runs(name)
    T = len(runs.pair.clean)
    for direction, target in (("denoise", runs.clean), ("noise", runs.corrupt)):
        rows = [[pr.Patch("resid", l, None, list(range(T)), None)] for l in range(hooked.n_layer)]
        for value in runs.patched(direction, rows):
            assert close(value, target, 1e-6), (direction, value, target)
    one = runs.patched("denoise", [[pr.Patch("resid", 0, None, [1], None)]])[0]
    assert not close(one, runs.clean, 1e-3)


@pytest.mark.parametrize("name", list(TINY))
def test_reference_sites_of_one_layer_compose(name):
    """Per layer: every head's o_h = the attention block's output = every head's q, k and v =
    every head's pattern with every value; per key/value group: q of the group's heads with the
    group's k and v = the group's o_h (GQA: a key/value head is shared by its group); per head:
    head_position at every position = head."""
    hooked, runs = tiny_runs(name)
    T, H, G = len(runs.pair.clean), hooked.n_head, hooked.n_kv
    P = pr.Patch
    moved = 0
    for l in range(hooked.n_layer):
        rows = [[P("attn", l, None, None, None)],
                [P("head", l, h, None, None) for h in range(H)],
                [P("q", l, h, None, None) for h in range(H)] + [P(s, l, g, None, None) for s in "kv" for g in range(G)],
                [P("pattern", l, h, None, None) for h in range(H)] + [P("v", l, g, None, None) for g in range(G)]]
        for g in range(G):
            group = hooked.group_of(g)
            rows.append([P("head", l, h, None, None) for h in group])
            rows.append([P("q", l, h, None, None) for h in group] + [P(s, l, g, None, None) for s in "kv"])
            rows.append([P("pattern", l, h, None, None) for h in group] + [P("v", l, g, None, None)])
        rows.append([P("head", l, H - 1, None, None)])
        rows.append([P("head_position", l, H - 1, [p], None) for p in range(T)])
        for direction, base_metric in (("denoise", runs.corrupt), ("noise", runs.clean)):
            v = runs.patched(direction, rows)
            block = v[0]
            assert all(close(x, block) for x in v[1:4]), (l, direction, v[:4])
            for g in range(G):
                a, b, c = v[4 + 3 * g:7 + 3 * g]
                assert close(a, b) and close(a, c), (l, g, direction, a, b, c)
            assert close(v[-2], v[-1]), (l, direction, v[-2:])
            moved += not close(block, base_metric, 1e-4) and not close(v[4], base_metric, 1e-4)
    assert moved == 2 * hooked.n_layer, "a block or a group that changes nothing: the test could not fail"


@pytest.mark.parametrize("name", list(TINY))
def test_reference_own_values_change_nothing(name):
    """Every entry of every site (positions: the first, a middle one and the last), patched with
    the base run's own values (noise and denoise alike), gives the base run's metric: the hooks
    replace what they should and nothing else."""
    hooked, runs = tiny_runs(name)
    T = len(runs.pair.clean)
    for direction, base_metric in (("denoise", runs.corrupt), ("noise", runs.clean)):
        _, base, _ = runs.base_source(direction)
        for site in pr.SITES:
            entries = [e for e in pr.sweep_entries(hooked, site, T) if e[2] in (None, 0, T // 2, T - 1)]
            rows = [[pr.dataclasses.replace(p, source=base) for p in e[4]] for e in entries]
            values = runs.patched(direction, rows)
            assert all(close(v, base_metric) for v in values), (site, direction)


def test_reference_sweep_means_and_normalises():
    """Over two pairs a sweep's value is the mean of the pairs' values and normalised comes from
    the means; the k/v results list their group's query heads."""
    hooked, tok, _ = tiny("llama_gqa3")
    pairs = [pr.make_pair(tok, TINY_CLEAN, TINY_CORRUPT, " the", " for"),
             pr.make_pair(tok, TINY_CORRUPT, TINY_CLEAN, " for", " the")]
    runs = [pr.PairRuns(hooked, p, "logit_diff") for p in pairs]
    both = pr.sweep(hooked, runs, "k")
    each = [pr.sweep(hooked, [r], "k") for r in runs]
    s = pr.summary(runs)
    for i, result in enumerate(both):
        assert close(result["value"], (each[0][i]["value"] + each[1][i]["value"]) / 2, 1e-9)
        assert close(result["normalised"], (result["value"] - s["corrupt"]) / (s["clean"] - s["corrupt"]), 1e-9)
        assert result["group"] == [3 * result["head"], 3 * result["head"] + 1, 3 * result["head"] + 2]
    assert [r["head"] for r in both] == [0, 1, 0, 1]


def residual_path_by_hand(hooked, runs, senders, receivers, receiver_input, direction="denoise"):
    """Path patching for a family whose residual stream is a plain sum (Llama, no norm after the
    blocks): in run 2 each sender adds W_O,h (o_h,source − o_h,base) to the residual stream, and
    nothing else changes, so the residual stream entering layer l is the base run's plus the
    senders of earlier layers' terms. The receivers' inputs are then the layer's own modules
    applied to that stream; logits: the final norm and unembedding of the last position."""
    ids, base, source = runs.base_source(direction)
    d = hooked.d_head

    def stream(upto):
        x = (base.resid[upto] if upto < hooked.n_layer else None)
        if x is None:  # after the last layer: the last layer's input plus its two blocks' outputs
            last = hooked.n_layer - 1
            x = base.resid[last] + base.attn[last] + base.mlp[last]
        x = x.clone()
        for l, h in senders:
            if l < upto:
                w = hooked.proj(l, "o").weight[:, h * d:(h + 1) * d]
                x += (source.o[l][:, h * d:(h + 1) * d] - base.o[l][:, h * d:(h + 1) * d]) @ w.T
        return x

    with torch.no_grad():
        if receiver_input == "logits":
            x = stream(hooked.n_layer)
            out = hooked.model.lm_head(hooked.base.norm(x[None]))[:, -1]
            return runs.measure(out)[0]
        recorded = pr.Cache(*[[None] * hooked.n_layer for _ in range(8)])
        targets = sorted({(l, h if receiver_input == "q" else h // hooked.group) for l, h in receivers})
        for l, _ in targets:
            layer = hooked.layers[l]
            getattr(recorded, receiver_input)[l] = hooked.proj(l, receiver_input)(layer.input_layernorm(stream(l)))
        patches = [pr.Patch(receiver_input, l, h, None, recorded) for l, h in targets]
        out, _ = hooked.run(ids, [patches])
    return runs.measure(out)[0]


def test_reference_path_patching():
    """Path patching on the tiny GQA Llama equals the residual-stream sum done by hand, for q, k,
    v and logits, in both directions; receivers no later than every sender see nothing (the base
    metric); senders of the last layer with the logits as receiver equal their head patch with the
    last MLP frozen; and with every head as a sender the MLPs stay frozen, so the value is not
    that of patching every head."""
    hooked, runs = tiny_runs("llama_gqa3")
    senders, receivers = [(0, 1), (0, 4), (1, 0)], [(1, 2), (1, 5)]
    for x in ("q", "k", "v", "logits"):
        got = pr.path_patch_one(hooked, runs, senders, receivers, x)
        want = residual_path_by_hand(hooked, runs, senders, receivers, x)
        assert close(got, want), (x, got, want)
        assert not close(got, runs.corrupt, 1e-4), x
    for x in ("q", "k", "v"):
        assert close(pr.path_patch_one(hooked, runs, [(1, 0), (1, 3)], [(1, 1), (0, 2)], x), runs.corrupt)
        assert close(pr.path_patch_one(hooked, runs, [(0, 0)], [(1, 1)], x, "noise"),
                     residual_path_by_hand(hooked, runs, [(0, 0)], [(1, 1)], x, "noise"))
    # Senders in the last layer reach the logits directly: their head patch with the last MLP frozen.
    last = hooked.n_layer - 1
    heads = [pr.Patch("head", last, h, None, None) for h in (0, 5)]
    frozen = runs.patched("denoise", [heads + [pr.Patch("mlp", last, None, None, runs.corrupt_cache)]])[0]
    assert close(pr.path_patch_one(hooked, runs, [(last, 0), (last, 5)], [], "logits"), frozen)
    everything = [(l, h) for l in range(hooked.n_layer) for h in range(hooked.n_head)]
    all_heads = runs.patched("denoise", [[pr.Patch("head", l, h, None, None) for l, h in everything]])[0]
    assert not close(pr.path_patch_one(hooked, runs, everything, [], "logits"), all_heads, 1e-4)


# ====================================================================== headscope patch vs the reference


def has_patch():
    if not os.path.exists(BIN):
        return False
    proc = subprocess.run([BIN, "--help"], capture_output=True, text=True, timeout=60)
    return re.search(r"^\s+patch\s", proc.stdout, re.M) is not None


needs_binary = pytest.mark.skipif(not has_patch(), reason=f"{BIN} has no `patch` subcommand yet")


def headscope_patch(tmp_path, model, args):
    out = tmp_path / "out.json"
    cmd = [BIN, "patch", "--model", str(model), *args, "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return json.loads(out.read_text())


def pair_args(clean, corrupt, answer=None, wrong=None):
    args = ["--clean", clean, "--corrupt", corrupt]
    if answer is not None:
        args += ["--answer", answer, "--wrong", wrong]
    return args


def pairs_file(tmp_path, pairs):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"pairs": [{"clean": c, "corrupt": k, "answer": a, "wrong": w}
                                          for c, k, a, w in pairs]}))
    return ["--pairs", str(path)]


def key(result):
    return (result["site"], result["layer"], result["head"], result["position"])


def compare(doc, hooked, runs, sites, direction, metric, label, layers=None):
    """Every result of headscope's JSON against the reference sweep; returns the largest |Δ|."""
    s = pr.summary(runs)
    assert doc["metric"] == metric and doc["direction"] == direction and doc["n_pairs"] == len(runs)
    assert isinstance(doc["model"], (str, dict))  # the contract says a name; headscope writes its model object
    worst = max(abs(doc["clean"] - s["clean"]), abs(doc["corrupt"] - s["corrupt"]))
    span = abs(doc["clean"] - doc["corrupt"])
    got = {}
    for result in doc["results"]:
        assert key(result) not in got, f"{label}: {key(result)} twice"
        got[key(result)] = result
    want = {}
    for site in sites:
        for result in pr.sweep(hooked, runs, site, direction, layers):
            want[key(result)] = result
    assert sorted(got, key=str) == sorted(want, key=str), f"{label}: the results are not one per site entry"
    for k, w in want.items():
        g = got[k]
        if "group" in w:
            assert g.get("group") == w["group"], (label, k, g.get("group"))
        else:
            assert g.get("group") in (None, []), (label, k)
        worst = max(worst, abs(g["value"] - w["value"]))
        # normalised: headscope's own value through its own clean/corrupt, and the reference's
        assert abs(g["normalised"] - (g["value"] - doc["corrupt"]) / (doc["clean"] - doc["corrupt"])) \
            <= 1e-6 * max(1.0, abs(g["normalised"])), (label, k)
        assert abs(g["normalised"] - w["normalised"]) <= 2 * TOL / min(span, 1.0), (label, k)
    print(f"\n{label}: {len(want)} results, max |Δ value| {worst:.2e}")
    assert worst <= TOL, label
    return worst


def compare_path(doc, hooked, runs, senders, receivers, receiver_input, direction, label):
    """headscope's "path" object against the reference: with named receivers (or the logits) its
    value and normalised; without, every entry of path.results (one per later head)."""
    s = pr.summary(runs)
    path = doc["path"]
    assert doc["direction"] == direction and doc["n_pairs"] == len(runs)
    assert path["senders"] == [list(x) for x in senders] and path["input"] == receiver_input
    worst = max(abs(doc["clean"] - s["clean"]), abs(doc["corrupt"] - s["corrupt"]))
    tol_normalised = 2 * TOL / min(abs(doc["clean"] - doc["corrupt"]), 1.0)
    if receivers or receiver_input == "logits":
        want = pr.path_patch(hooked, runs, senders, receivers, receiver_input, direction)
        assert path.get("receivers", []) == [list(x) for x in receivers]
        worst = max(worst, abs(path["value"] - want["value"]))
        assert abs(path["normalised"] - want["normalised"]) <= tol_normalised, label
        print(f"\n{label}: path {path['value']:.6f} (reference {want['value']:.6f}), |Δ| {worst:.2e}")
    else:
        want = pr.path_patch_each_later(hooked, runs, senders, receiver_input, direction)
        got = {tuple(map(tuple, r["receivers"])): r for r in path["results"]}
        assert sorted(got) == sorted(tuple(map(tuple, w["receivers"])) for w in want), label
        for w in want:
            g = got[tuple(map(tuple, w["receivers"]))]
            worst = max(worst, abs(g["value"] - w["value"]))
            assert abs(g["normalised"] - w["normalised"]) <= tol_normalised, (label, w["receivers"])
        print(f"\n{label}: {len(want)} receivers, max |Δ| {worst:.2e}")
    assert worst <= TOL, label


def heads_arg(heads):
    return ",".join(f"{l}.{h}" for l, h in heads)


def path_args(senders, receivers, receiver_input, direction):
    """--direction always named: the contract makes denoise the default everywhere, headscope's
    path patching defaults to noise (Wang et al.'s convention)."""
    args = ["--senders", heads_arg(senders), "--receiver-input", receiver_input, "--direction", direction]
    return args + (["--receivers", heads_arg(receivers)] if receivers else [])


TINY_CASES = [("bert_bare", "denoise", "cosine"), ("bert_bare", "noise", "cosine"),
              ("llama_gqa3", "denoise", "logit_diff"), ("llama_gqa3", "noise", "loss"),
              ("gemma3_text", "denoise", "prob"), ("gemma3_text", "noise", "logit_diff"),
              ("qwen3", "noise", "prob"), ("olmo2", "denoise", "logit_diff")]


@needs_binary
@pytest.mark.parametrize("name,direction,metric", TINY_CASES)
def test_tiny_every_site(tmp_path, name, direction, metric):
    """Every site in one call, on one pair of 24/25 tokens; encoders take no answers and no
    --metric (cosine is theirs), decoders name the metric."""
    hooked, runs = tiny_runs(name, metric)
    _, _, folder = tiny(name)
    _, encoder, answer, wrong = TINY[name]
    args = pair_args(TINY_CLEAN, TINY_CORRUPT, answer, wrong) + ["--site", ALL_SITES, "--direction", direction]
    if not encoder:
        args += ["--metric", metric]
    doc = headscope_patch(tmp_path, folder, args)
    compare(doc, hooked, [runs], ALL_SITES.split(","), direction, metric, f"{name} {direction} {metric}")


# (model, senders, receivers ([] with the logits; [] otherwise: every later head alone), input, direction)
TINY_PATHS = [("llama_gqa3", [(0, 1), (0, 4)], [(1, 2), (1, 5)], "q", "denoise"),
              ("llama_gqa3", [(0, 1), (0, 4)], [(1, 2), (1, 5)], "k", "noise"),
              ("llama_gqa3", [(0, 0)], [(1, 3)], "v", "denoise"),
              ("llama_gqa3", [(0, 2), (1, 4)], [], "logits", "denoise"),
              ("llama_gqa3", [(0, 3)], [], "k", "noise"),
              ("gemma3_text", [(1, 0), (2, 3)], [(4, 1)], "k", "denoise"),
              ("gemma3_text", [(0, 2)], [(3, 0), (5, 3)], "q", "noise"),
              ("gemma3_text", [(3, 1), (4, 2)], [], "logits", "noise"),
              ("gemma3_text", [(2, 1), (3, 3)], [], "v", "denoise"),
              ("olmo2", [(0, 1), (0, 2)], [(1, 0), (1, 3)], "q", "denoise"),
              ("olmo2", [(0, 3)], [], "k", "noise"),
              ("bert_bare", [(0, 1)], [(1, 2)], "v", "denoise"),
              ("bert_bare", [(0, 0), (0, 3)], [], "q", "noise")]


@needs_binary
@pytest.mark.parametrize("name,senders,receivers,receiver_input,direction", TINY_PATHS)
def test_tiny_path_patching(tmp_path, name, senders, receivers, receiver_input, direction):
    hooked, runs = tiny_runs(name)
    _, _, folder = tiny(name)
    _, _, answer, wrong = TINY[name]
    args = pair_args(TINY_CLEAN, TINY_CORRUPT, answer, wrong) + path_args(senders, receivers, receiver_input, direction)
    doc = headscope_patch(tmp_path, folder, args)
    compare_path(doc, hooked, [runs], senders, receivers, receiver_input, direction,
                 f"{name} path {heads_arg(senders)} -> {heads_arg(receivers) or 'each later head'} "
                 f"{receiver_input} {direction}")


@needs_binary
def test_tiny_pairs_file_means(tmp_path):
    """Two pairs from a pairs file (the second the first one swapped): raw values are means over
    the pairs, normalised comes from the means; the defaults: denoise, logit_diff."""
    hooked, tok, folder = tiny("llama_gqa3")
    pairs = [(TINY_CLEAN, TINY_CORRUPT, " the", " for"), (TINY_CORRUPT, TINY_CLEAN, " for", " the")]
    runs = [pr.PairRuns(hooked, pr.make_pair(tok, *p), "logit_diff") for p in pairs]
    doc = headscope_patch(tmp_path, folder, pairs_file(tmp_path, pairs) + ["--site", "head,k,resid"])
    compare(doc, hooked, runs, ["head", "k", "resid"], "denoise", "logit_diff", "llama_gqa3 two pairs")


@needs_binary
def test_minilm_heads(tmp_path):
    """The default model (all-MiniLM-L6-v2: WordPiece with [CLS] and [SEP], 6 layers of 12 heads)."""
    model = transformers.AutoModel.from_pretrained(MINILM, attn_implementation="eager")
    tok = transformers.AutoTokenizer.from_pretrained(MINILM)
    hooked = pr.Hooked(model.float())
    clean, corrupt = "The keys to the cabinet are on the table.", "The cat of the neighbour is on the roof."
    runs = pr.PairRuns(hooked, pr.make_pair(tok, clean, corrupt), "cosine")
    doc = headscope_patch(tmp_path, MINILM, pair_args(clean, corrupt) + ["--site", "head,mlp", "--direction", "noise"])
    compare(doc, hooked, [runs], ["head", "mlp"], "noise", "cosine", "all-MiniLM-L6-v2 head,mlp noise")


def real_runs(path, pairs, metric="logit_diff"):
    hooked, tok = real(path)
    return hooked, [pr.PairRuns(hooked, pr.make_pair(tok, *p), metric) for p in pairs]


@needs_binary
def test_real_smollm2_heads(tmp_path):
    """Every head of SmolLM2-135M (30 layers × 9 heads over 3 key/value heads); the defaults: site
    head, denoise, logit_diff."""
    hooked, runs = real_runs(SMOLLM2, IOI[:1])
    doc = headscope_patch(tmp_path, SMOLLM2, pair_args(*IOI[0]))
    compare(doc, hooked, runs, ["head"], "denoise", "logit_diff", "SmolLM2 head denoise")


@needs_binary
def test_real_smollm2_resid_and_path(tmp_path):
    """The residual stream at every position of three layers (noise), and a path patch to queries."""
    hooked, runs = real_runs(SMOLLM2, IOI[1:])
    layers = [0, 14, 29]
    doc = headscope_patch(tmp_path, SMOLLM2, pair_args(*IOI[1]) + [
        "--site", "resid", "--direction", "noise", "--layers", ",".join(map(str, layers))])
    compare(doc, hooked, runs, ["resid"], "noise", "logit_diff", "SmolLM2 resid noise", layers)
    senders, receivers = [(8, 1), (9, 6), (12, 3)], [(14, 4), (16, 0)]
    doc = headscope_patch(tmp_path, SMOLLM2, pair_args(*IOI[1]) + path_args(senders, receivers, "q", "denoise"))
    compare_path(doc, hooked, runs, senders, receivers, "q", "denoise", "SmolLM2 path q denoise")


@needs_binary
def test_real_gemma3_270m_heads_resid_and_path(tmp_path):
    """Gemma 3 270M (18 layers × 4 heads over one key/value head, q/k norms, sandwich norms, five
    sliding-window layers to one global): head and resid on layers of both kinds, two path patches."""
    hooked, runs = real_runs(GEMMA_270M, IOI[:1])
    layers = [0, 4, 5, 11, 17]
    doc = headscope_patch(tmp_path, GEMMA_270M, pair_args(*IOI[0]) + [
        "--site", "head,resid", "--layers", ",".join(map(str, layers))])
    compare(doc, hooked, runs, ["head", "resid"], "denoise", "logit_diff", "Gemma 3 270M head,resid denoise", layers)
    senders, receivers = [(5, 0), (7, 2)], [(10, 1), (12, 3)]
    for receiver_input, r, direction in (("v", receivers, "denoise"), ("logits", [], "noise")):
        args = pair_args(*IOI[0]) + path_args(senders, r, receiver_input, direction)
        doc = headscope_patch(tmp_path, GEMMA_270M, args)
        compare_path(doc, hooked, runs, senders, r, receiver_input, direction,
                     f"Gemma 3 270M path {receiver_input} {direction}")
