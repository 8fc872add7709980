"""Activation patching done by transformers itself, as the reference for `headscope patch`.

Everything here runs the Hugging Face model's own forward and changes it only through PyTorch
forward hooks, forward pre-hooks and one registered attention function; nothing of the model's
arithmetic is written again. The contract (sites, metrics, directions, path patching, normalised
values) is the one `headscope patch` follows; in short:

  base run    the prompt that is run (denoise: the corrupt prompt; noise: the clean one);
  source run  the prompt whose activations are copied in (denoise: clean; noise: corrupt);
  sites       head, head_position, q, k, v, pattern, resid, attn, mlp (see SITES below);
  metrics     decoders, at the last position: logit_diff, prob, loss; encoders: cosine,
              1 − cos(mean-pooled last hidden state, that of the clean run);
  normalised  (patched − corrupt) / (clean − corrupt), from the means over the pairs.

Where each site lives in transformers (5.x module names). Decoders (Llama, Qwen2/3, Mistral,
SmolLM2, Gemma 2/3, OLMo 2), in model.model.layers[l]:
  head      self_attn.o_proj input, the slice of head h
  q, k, v   self_attn.{q,k,v}_proj output, the slice of the (key/value) head
            (OLMo 2's q and k: self_attn.{q,k}_norm output, see below)
  pattern   the attention function's probabilities
  resid     the decoder layer's input (hidden_states)
  attn      self_attn output; post_attention_layernorm output in families with norms after
            the blocks (Gemma 2/3, OLMo 2: those that have a post_feedforward_layernorm)
  mlp       mlp output; post_feedforward_layernorm output in those families
BERT, in encoder.layer[l]:
  head      attention.output.dense input          q, k, v   attention.self.{query,key,value}
  resid     the encoder layer's input             attn      attention.output.dense output
  mlp       output.dense output                   pattern   as for decoders

q, k and v are replaced at the projection's output, before Qwen3's / Gemma 3's q/k RMSNorm and
before RoPE, where headscope replaces them after both. The two are the same patch: the norm
(over one head's d_head values, with one weight vector shared by every head) and the rotation
(by the token's own position) act on each (position, head) slice alone, so a slice that equals
the source run's before them equals it after them too, and the other slices are untouched.
OLMo 2's q/k norm is taken over the whole projection (every head at once): there q and k are
replaced at the norm's output instead, which is still before RoPE, still per (position, head).

The attention probabilities are replaced by a registered attention function ("headscope_patch",
AttentionInterface and AttentionMaskInterface): it calls the modeling module's own
eager_attention_forward (so soft-capping, scaling, sliding windows and masks stay the model's),
records the probabilities when asked, and for a patched head overwrites its probabilities and
recomputes that head's output as P_source · V_base, with V the head's key/value head under GQA.

Several patched runs of one prompt are done as one batch, row b carrying its own patches.
"""
from __future__ import annotations

import dataclasses
import math
import sys

import torch
import transformers
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

SITES = ("head", "head_position", "q", "k", "v", "pattern", "resid", "attn", "mlp")
DECODER_METRICS = ("logit_diff", "prob", "loss")
IMPLEMENTATION = "headscope_patch"

# What the attention function does for the run in progress: {attention module: {row: {head: P}}}
# and, when recording, {attention module: [B, H, T, S] probabilities}.
_ATTENTION = {"patterns": {}, "record": None}


def _attention(module, query, key, value, attention_mask, **kwargs):
    eager = sys.modules[type(module).__module__].eager_attention_forward
    out, weights = eager(module, query, key, value, attention_mask, **kwargs)
    if _ATTENTION["record"] is not None:
        _ATTENTION["record"][module] = weights.detach().clone()
    rows = _ATTENTION["patterns"].get(module)
    if rows:
        out, weights = out.clone(), weights.clone()  # out [B, T, H, D], weights [B, H, T, S]
        n_rep = query.shape[1] // value.shape[1]
        for b, heads in rows.items():
            for h, p in heads.items():
                weights[b, h] = p
                out[b, :, h] = p.to(value.dtype) @ value[b, h // n_rep]
    return out, weights


AttentionInterface.register(IMPLEMENTATION, _attention)
AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)


@dataclasses.dataclass
class Patch:
    """Replace, in the base run, `site` of `layer` (head h: a query head for head/q/pattern, a
    key/value head for k/v; None for resid/attn/mlp) at `positions` (None: every position) by the
    same slice of `source`, a recorded Cache."""
    site: str
    layer: int
    head: int | None
    positions: list[int] | None
    source: "Cache"


@dataclasses.dataclass
class Cache:
    """What one unpatched (or patched) batch-1 run recorded, per layer: o [T, H·d] (W_O's input),
    q [T, H·d], k and v [T, Hkv·d], pattern [H, T, T], resid [T, D], attn [T, D], mlp [T, D]."""
    o: list
    q: list
    k: list
    v: list
    pattern: list
    resid: list
    attn: list
    mlp: list


def _slice_of(site):
    return {"head": "o", "head_position": "o"}.get(site, site)


class Hooked:
    """A transformers model with the sites of every layer found, run with patches."""

    def __init__(self, model):
        model.eval()
        model.set_attn_implementation(IMPLEMENTATION)
        self.model = model
        cfg = model.config
        self.encoder = hasattr(model, "encoder") or hasattr(model, "bert")
        if self.encoder:  # BERT: BertModel, or a task model holding one as .bert
            self.base = model.bert if hasattr(model, "bert") else model
            self.layers = list(self.base.encoder.layer)
            self.n_head = self.n_kv = cfg.num_attention_heads
            self.d_head = cfg.hidden_size // cfg.num_attention_heads
        else:
            self.base = model.model if hasattr(model, "model") else model
            self.layers = list(self.base.layers)
            self.n_head, self.n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
            self.d_head = self.layers[0].self_attn.head_dim
        self.n_layer = len(self.layers)
        self.group = self.n_head // self.n_kv
        self.sandwich = not self.encoder and hasattr(self.layers[0], "post_feedforward_layernorm")

    # ------------------------------------------------------------------ modules of a layer
    def attention(self, l):
        """The module whose forward calls the attention function."""
        return self.layers[l].attention.self if self.encoder else self.layers[l].self_attn

    def proj(self, l, name):
        """The module whose output holds q, k or v of every head, [.., T, heads·d_head]: the
        projection, or OLMo 2's q/k norm, which normalises the whole projection at once (so
        there a slice before the norm does not fix the slice after it, unlike the per-head norms
        of Qwen3 and Gemma 3). "o": W_O, whose input is the concatenation of the heads' outputs."""
        layer = self.layers[l]
        if self.encoder:
            if name == "o":
                return layer.attention.output.dense
            return getattr(layer.attention.self, {"q": "query", "k": "key", "v": "value"}[name])
        attn = layer.self_attn
        norm, linear = getattr(attn, f"{name}_norm", None), getattr(attn, f"{name}_proj")
        # A per-head norm has d_head weights and sees [B, heads, T, d_head]; OLMo 2's has the
        # projection's width and sees [B, T, width]. (With one head they are the same patch.)
        if norm is not None and norm.weight.numel() == linear.out_features != self.d_head:
            return norm
        return linear

    def block_output(self, l, site):
        """The module whose output is what the attention block (site attn) or the MLP (site mlp)
        adds to the residual stream."""
        layer = self.layers[l]
        if self.encoder:
            return layer.attention.output.dense if site == "attn" else layer.output.dense
        if self.sandwich:
            return layer.post_attention_layernorm if site == "attn" else layer.post_feedforward_layernorm
        return layer.self_attn if site == "attn" else layer.mlp

    def group_of(self, kv_head):
        return list(range(kv_head * self.group, (kv_head + 1) * self.group))

    # ------------------------------------------------------------------ running
    def run(self, ids, rows=None, record=False):
        """Runs `ids` (a list of token ids) as a batch of len(rows) copies, row b with the patches
        rows[b]. Returns (out, cache): out is the last position's logits [B, vocab] for a decoder,
        the last hidden state [B, T, D] for an encoder; cache the recorded Cache (B must be 1)."""
        rows = rows if rows is not None else [[]]
        assert not record or len(rows) == 1
        handles = []
        per_module = {}  # (kind, module) -> list of (row, patch)
        patterns = {}
        for b, patches in enumerate(rows):
            for p in patches:
                site = _slice_of(p.site)
                if site == "pattern":
                    patterns.setdefault(self.attention(p.layer), {}).setdefault(b, {})[p.head] = \
                        p.source.pattern[p.layer][p.head]
                    continue
                if site == "o":
                    key = ("pre", self.proj(p.layer, "o"))
                elif site in ("q", "k", "v"):
                    key = ("out", self.proj(p.layer, site))
                elif site == "resid":
                    key = ("layer", self.layers[p.layer])
                else:
                    key = ("out", self.block_output(p.layer, site))
                per_module.setdefault(key, []).append((b, p))

        def overwrite(x, patches):
            x = x.clone()
            for b, p in patches:
                src = getattr(p.source, _slice_of(p.site))[p.layer]  # [T, width]
                pos = slice(None) if p.positions is None else p.positions
                if p.head is None:
                    x[b, pos] = src[pos]
                else:
                    cols = slice(p.head * self.d_head, (p.head + 1) * self.d_head)
                    x[b, pos, cols] = src[pos, cols]
            return x

        for (kind, module), patches in per_module.items():
            if kind == "pre":
                handles.append(module.register_forward_pre_hook(
                    lambda m, args, patches=patches: (overwrite(args[0], patches), *args[1:])))
            elif kind == "layer":
                def pre(m, args, kwargs, patches=patches):
                    if args:
                        return (overwrite(args[0], patches), *args[1:]), kwargs
                    return args, dict(kwargs, hidden_states=overwrite(kwargs["hidden_states"], patches))
                handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))
            else:
                def post(m, args, output, patches=patches):
                    if isinstance(output, tuple):  # self_attn returns (output, probabilities)
                        return (overwrite(output[0], patches), *output[1:])
                    return overwrite(output, patches)
                handles.append(module.register_forward_hook(post))

        seen = {}
        if record:  # after the patches' hooks, so that what is recorded is what the run used
            for l in range(self.n_layer):
                def keep(name, l=l):
                    return lambda m, args, output: seen.__setitem__(
                        (name, l), (output[0] if isinstance(output, tuple) else output)[0].detach().clone())
                handles.append(self.proj(l, "o").register_forward_pre_hook(
                    lambda m, args, l=l: seen.__setitem__(("o", l), args[0][0].detach().clone())))
                for name in ("q", "k", "v"):
                    handles.append(self.proj(l, name).register_forward_hook(keep(name)))
                for name in ("attn", "mlp"):
                    handles.append(self.block_output(l, name).register_forward_hook(keep(name)))

                def resid(m, args, kwargs, l=l):
                    x = args[0] if args else kwargs["hidden_states"]
                    seen[("resid", l)] = x[0].detach().clone()
                handles.append(self.layers[l].register_forward_pre_hook(resid, with_kwargs=True))
        _ATTENTION["patterns"] = patterns
        _ATTENTION["record"] = {} if record else None
        try:
            batch = torch.tensor([list(ids)] * len(rows))
            with torch.no_grad():
                if self.encoder:
                    out = self.base(input_ids=batch).last_hidden_state
                else:
                    out = self.model(input_ids=batch, use_cache=False, logits_to_keep=1).logits[:, -1]
            cache = None
            if record:
                probs = _ATTENTION["record"]
                cache = Cache(*([seen[(name, l)] for l in range(self.n_layer)]
                                for name in ("o", "q", "k", "v")),
                              [probs[self.attention(l)][0] for l in range(self.n_layer)],
                              *([seen[(name, l)] for l in range(self.n_layer)] for name in ("resid", "attn", "mlp")))
        finally:
            for h in handles:
                h.remove()
            _ATTENTION["patterns"] = {}
            _ATTENTION["record"] = None
        return out, cache


# ---------------------------------------------------------------------- metrics


@dataclasses.dataclass
class Pair:
    """One prompt pair as token ids: clean and corrupt of the same length; answer and wrong ids
    (decoders only)."""
    clean: list
    corrupt: list
    answer: int = -1
    wrong: int = -1


def metric_values(hooked, out, pair, metric, clean_out=None):
    """The metric of every row of a run's output (see Hooked.run), as float64 numbers.
    Encoders: clean_out is the clean run's last hidden state [1, T, D]."""
    if hooked.encoder:
        assert metric == "cosine"
        a = out.double().mean(1)
        b = clean_out.double().mean(1)
        cos = (a * b).sum(-1) / torch.sqrt((a * a).sum(-1) * (b * b).sum(-1))
        return (1 - cos).tolist()
    logits = out.double()
    if metric == "logit_diff":
        return (logits[:, pair.answer] - logits[:, pair.wrong]).tolist()
    logp = torch.log_softmax(logits, -1)[:, pair.answer]
    if metric == "prob":
        return logp.exp().tolist()
    if metric == "loss":
        return (-logp).tolist()
    raise ValueError(metric)


class PairRuns:
    """The clean and corrupt runs of one pair, recorded, and their metrics."""

    def __init__(self, hooked, pair, metric):
        assert len(pair.clean) == len(pair.corrupt), "the prompts of a pair must have the same token count"
        self.hooked, self.pair, self.metric = hooked, pair, metric
        self.clean_out, self.clean_cache = hooked.run(pair.clean, record=True)
        self.corrupt_out, self.corrupt_cache = hooked.run(pair.corrupt, record=True)
        self.clean = self.measure(self.clean_out)[0]
        self.corrupt = self.measure(self.corrupt_out)[0]

    def measure(self, out):
        return metric_values(self.hooked, out, self.pair, self.metric, self.clean_out)

    def base_source(self, direction):
        """(base ids, base cache, source cache)."""
        if direction == "denoise":
            return self.pair.corrupt, self.corrupt_cache, self.clean_cache
        if direction == "noise":
            return self.pair.clean, self.clean_cache, self.corrupt_cache
        raise ValueError(direction)

    def patched(self, direction, rows, batch=32):
        """The metric of the base run with each row's patches (each Patch's source is filled in
        with the source run's cache when it is None)."""
        ids, _, source = self.base_source(direction)
        rows = [[dataclasses.replace(p, source=p.source or source) for p in row] for row in rows]
        values = []
        for i in range(0, len(rows), batch):
            out, _ = self.hooked.run(ids, rows[i:i + batch])
            values += self.measure(out)
        return values


def default_metric(hooked):
    return "cosine" if hooked.encoder else "logit_diff"


def sweep_entries(hooked, site, n_tokens, layers=None):
    """The results of one site, in order: (layer, head, position, group, patches) with `patches`
    a list of Patch without source; `layers`: only these (default: every layer)."""
    entries = []
    for l in (range(hooked.n_layer) if layers is None else layers):
        if site in ("head", "q", "pattern"):
            for h in range(hooked.n_head):
                entries.append((l, h, None, None, [Patch(site, l, h, None, None)]))
        elif site == "head_position":
            for h in range(hooked.n_head):
                for p in range(n_tokens):
                    entries.append((l, h, p, None, [Patch(site, l, h, [p], None)]))
        elif site in ("k", "v"):
            for g in range(hooked.n_kv):
                entries.append((l, g, None, hooked.group_of(g), [Patch(site, l, g, None, None)]))
        elif site == "resid":
            for p in range(n_tokens):
                entries.append((l, None, p, None, [Patch(site, l, None, [p], None)]))
        elif site in ("attn", "mlp"):
            entries.append((l, None, None, None, [Patch(site, l, None, None, None)]))
        else:
            raise ValueError(site)
    return entries


def normalise(value, clean, corrupt):
    return (value - corrupt) / (clean - corrupt)


def sweep(hooked, runs, site, direction="denoise", layers=None):
    """One site over every layer (or `layers`) and head, position: a list of result dicts in the
    JSON form headscope writes: {"site", "layer", "head", "position", "group" (k, v only),
    "value", "normalised"}; value is the mean over the pairs `runs` (PairRuns)."""
    n_tokens = len(runs[0].pair.clean)
    entries = sweep_entries(hooked, site, n_tokens, layers)
    per_pair = [r.patched(direction, [e[4] for e in entries]) for r in runs]
    clean, corrupt = mean([r.clean for r in runs]), mean([r.corrupt for r in runs])
    results = []
    for i, (l, h, p, group, _) in enumerate(entries):
        value = mean([v[i] for v in per_pair])
        result = {"site": site, "layer": l, "head": h, "position": p, "value": value,
                  "normalised": normalise(value, clean, corrupt)}
        if group is not None:
            result["group"] = group
        results.append(result)
    return results


def mean(values):
    return math.fsum(values) / len(values)


def summary(runs):
    """{"clean", "corrupt"}: the unpatched metrics, means over the pairs."""
    return {"clean": mean([r.clean for r in runs]), "corrupt": mean([r.corrupt for r in runs])}


# ---------------------------------------------------------------------- path patching


def path_patch_one(hooked, runs, senders, receivers, receiver_input, direction="denoise"):
    """Path patching (Wang et al. 2022) for one pair: run 2 is the base prompt with the senders'
    head outputs o_h taken from the source run and every other head's o_h and every MLP output
    frozen at the base run's own; receiver_input "logits" reads the metric of run 2, and q, k or
    v records the receivers' queries (or their key/value heads' keys, values) in run 2 and
    returns the metric of run 3, the base prompt with only those replaced. Heads and MLPs are
    frozen in every layer (headscope resumes from the first sender's layer: the same, since
    nothing before it sees the senders); an MLP is frozen at its site (Gemma: after the norm),
    the same as freezing the MLP's own output."""
    ids, base, source = runs.base_source(direction)
    senders = {tuple(s) for s in senders}
    frozen = []
    for l in range(hooked.n_layer):
        for h in range(hooked.n_head):
            frozen.append(Patch("head", l, h, None, source if (l, h) in senders else base))
        frozen.append(Patch("mlp", l, None, None, base))
    if receiver_input == "logits":
        out, _ = hooked.run(ids, [frozen])
        return runs.measure(out)[0]
    _, run2 = hooked.run(ids, [frozen], record=True)
    if receiver_input == "q":
        targets = sorted({(l, h) for l, h in receivers})
    elif receiver_input in ("k", "v"):
        targets = sorted({(l, h // hooked.group) for l, h in receivers})
    else:
        raise ValueError(receiver_input)
    out, _ = hooked.run(ids, [[Patch(receiver_input, l, h, None, run2) for l, h in targets]])
    return runs.measure(out)[0]


def path_patch(hooked, runs, senders, receivers, receiver_input, direction="denoise"):
    """The "path" object of headscope's JSON, means over the pairs `runs`."""
    value = mean([path_patch_one(hooked, r, senders, receivers, receiver_input, direction) for r in runs])
    s = summary(runs)
    return {"senders": [list(x) for x in senders], "receivers": [list(x) for x in receivers],
            "input": receiver_input, "value": value, "normalised": normalise(value, s["clean"], s["corrupt"])}


def path_patch_each_later(hooked, runs, senders, receiver_input, direction="denoise"):
    """Without named receivers: every head of every layer after the last sender's, alone, as the
    receiver. A list of {"receivers": [[l, h]], "value", "normalised"}."""
    last = max(l for l, _ in senders)
    s = summary(runs)
    results = []
    for l in range(last + 1, hooked.n_layer):
        for h in range(hooked.n_head):
            value = mean([path_patch_one(hooked, r, senders, [(l, h)], receiver_input, direction) for r in runs])
            results.append({"receivers": [[l, h]], "value": value,
                            "normalised": normalise(value, s["clean"], s["corrupt"])})
    return results


# ---------------------------------------------------------------------- loading


def load_hf(folder, encoder=False):
    """A tiny Hugging Face folder (config.json, model.safetensors, tokenizer.json): (Hooked,
    tokenizers.Tokenizer)."""
    import tokenizers
    cls = transformers.AutoModel if encoder else transformers.AutoModelForCausalLM
    model = cls.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="eager")
    return Hooked(model), tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))


def load_gguf(path):
    """A GGUF decoder, dequantised to float32 by transformers: (Hooked, tokenizer)."""
    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                              dtype=torch.float32, attn_implementation="eager")
    return Hooked(model), tok


def encode(tok, text, specials=True):
    """Token ids of `text`, with the tokenizer's own special tokens (BOS, [CLS] … [SEP]) or none."""
    if isinstance(tok, transformers.PreTrainedTokenizerBase):
        return tok(text, add_special_tokens=specials).input_ids
    return tok.encode(text, add_special_tokens=specials).ids


def make_pair(tok, clean, corrupt, answer=None, wrong=None):
    """A Pair from texts; answers must be one token each (encoded without special tokens)."""
    ids = [encode(tok, clean), encode(tok, corrupt)]
    assert len(ids[0]) == len(ids[1]), f"{len(ids[0])} != {len(ids[1])} tokens: {clean!r} / {corrupt!r}"
    pair = Pair(*ids)
    if answer is not None:
        a, w = encode(tok, answer, False), encode(tok, wrong, False)
        assert len(a) == 1 and len(w) == 1, (answer, a, wrong, w)
        pair.answer, pair.wrong = a[0], w[0]
    return pair
