"""headscope: every attention head of a transformer, captured and explained, on CPU.

Load a Hugging Face model directory (config.json, *.safetensors, tokenizer.json) or a .gguf file,
run a text, and read what each head does as NumPy arrays, records and pandas DataFrames::

    import headscope
    model = headscope.load("models/all-MiniLM-L6-v2")
    result = model.run("The animal didn't cross the street because it was too tired.")
    result.attention.shape          # (n_layer, n_head, T, T)
    result.roles_frame()            # one row per head: its role and the evidence for it

Shapes use one vocabulary throughout: n_layer, n_head (query heads), n_kv_head, d_model, d_head,
T (tokens); attention is [layer, head, q, k], row q a distribution over the keys k.
Errors are raised as headscope.Error (a ValueError) with the CLI's one-line messages; a missing
model path as headscope.FileError (also an OSError); a budget exceeded as headscope.ResourceError.
See docs/python.md.
"""

from __future__ import annotations

import dataclasses
import functools
import json as _json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

# OpenMP threads waiting for work sleep rather than spin (OMP_WAIT_POLICY=passive), as the CLI
# sets for itself (tools/cli/common.h), unless the user chose a policy: libgomp reads the variable
# when it is loaded, which for most programs is the import of _core just below. On a shared
# machine spinning workers made a run of SmolLM2 20-30x slower at two threads.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "passive"

from . import _core  # noqa: E402
from ._core import Error, FileError, ResourceError  # noqa: E402
from .corpus import CorpusResult, CorpusStats  # noqa: E402

if TYPE_CHECKING:  # pragma: no cover
    import pandas

__all__ = [
    "Composition",
    "Config",
    "CorpusResult",
    "CorpusStats",
    "Encoding",
    "Error",
    "FileError",
    "Generation",
    "Gradients",
    "HeadLens",
    "HeadRole",
    "HeadStats",
    "LogitLens",
    "Model",
    "PatchResult",
    "PromptPairs",
    "ResourceError",
    "Result",
    "Saliency",
    "Tokenizer",
    "analyse_attention",
    "greater_than_pairs",
    "induction_pairs",
    "ioi_pairs",
    "kernel_isa",
    "load",
    "read_pairs",
    "statistics_catalogue",
    "write_pairs",
]
__version__ = "0.1.0"

Capture = Literal["attention", "head_outputs", "contributions", "hidden_states", "queries", "keys"]
PatchSite = Literal["head", "head_position", "q", "k", "v", "pattern", "resid", "attn", "mlp"]
HeadSpec = str | tuple[int, int] | Iterable[tuple[int, int]]
_CAPTURES = ("attention", "head_outputs", "contributions", "hidden_states", "queries", "keys")


def _utf8(text: str | bytes, what: str = "text") -> bytes:
    """The UTF-8 bytes of `text`; bytes pass unchanged (the core rejects invalid UTF-8)."""
    if isinstance(text, bytes):
        return text
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str or bytes, not {type(text).__name__}")
    # Lone surrogates are passed through as they are, so the core names them as invalid UTF-8.
    return text.encode("utf-8", "surrogatepass")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# ---- model and tokenizer ----


@dataclass(frozen=True)
class Config:
    """A model's hyper-parameters: the model keys of the core's description (GET /api/model,
    Model.description) under the same names, plus norm_eps and eos_token_id. `family` and `vocab`,
    the names of earlier versions, remain as aliases of architecture and vocab_size."""

    name: str  # the folder or .gguf file it was loaded from
    architecture: str  # "bert", "llama", "gpt2", ... (the family file in src/models/)
    n_layer: int
    n_head: int  # query heads
    n_kv_head: int  # key/value heads (< n_head under grouped-query attention)
    d_model: int
    d_head: int
    d_ff: int
    vocab_size: int
    max_positions: int  # longest sequence the model takes
    causal: bool  # decoder: query q sees keys k <= q only
    kv_head_of: tuple[int, ...]  # per query head: the key/value head it reads
    window: tuple[int, ...]  # per layer: sliding window (query q sees keys q - w + 1 .. q); 0 = none
    w_o_shape: tuple[int, int]  # the output projection: [d_model, n_head * d_head]
    norm_eps: float
    eos_token_id: int  # -1 when the model names none

    @property
    def family(self) -> str:
        """Alias of architecture."""
        return self.architecture

    @property
    def vocab(self) -> int:
        """Alias of vocab_size."""
        return self.vocab_size

    @classmethod
    def _of(cls, description: dict, core: _core.Model) -> Config:
        """The Config of the core's description; every field but the two Python adds must be there."""
        extra = {"norm_eps": core.norm_eps, "eos_token_id": core.eos_token_id}
        values = {f.name: extra[f.name] if f.name in extra else description[f.name] for f in dataclasses.fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


@dataclass(frozen=True)
class Encoding:
    """A tokenised text: for token i its id, vocabulary entry, byte span [begin, end) in the
    UTF-8 text ((0, 0) for a special token) and whether the template added it."""

    ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]]
    special: list[bool]

    def __len__(self) -> int:
        return len(self.ids)


def _encoding(t: tuple) -> Encoding:
    ids, tokens, offsets, special = t
    return Encoding(list(ids), list(tokens), [tuple(o) for o in offsets], list(special))


class Tokenizer:
    """The model's tokenizer (read from tokenizer.json or the .gguf)."""

    def __init__(self, core: _core.Model, name: str) -> None:
        self._core = core
        self._name = name

    def encode(self, text: str | bytes, *, special_tokens: bool = True) -> Encoding:
        """Tokenise `text` with the model's template (special tokens added unless told not to).

        No length limit applies here; Model.run refuses a text longer than max_positions.
        """
        return _encoding(self._core.encode(_utf8(text), special_tokens))

    def decode(self, ids: Iterable[int]) -> str:
        """The text that `ids` stand for, as the tokenizer's decoder writes it."""
        return _text(self._core.decode([int(i) for i in ids]))

    def __repr__(self) -> str:
        return f"<headscope.Tokenizer of {self._name}>"


@dataclass(frozen=True)
class Generation:
    """What Model.generate returns: ids is prompt + continuation; generated holds one
    (position, id, vocabulary entry, logit) tuple per new token; attention [layer, head, T, T]
    over all T = len(ids) tokens when capture_attention was set, else None."""

    prompt_tokens: int
    ids: list[int]
    generated: list[tuple[int, int, str, float]]
    continuation: str
    stopped_at_eos: bool
    stopped_at_limit: bool
    attention: np.ndarray | None


def _tqdm_progress(total_label: str) -> Callable[[str, int, int], None] | None:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        bar = bars.get(stage)
        if bar is None:
            for other in bars.values():
                other.close()
            bar = bars[stage] = tqdm(total=total, desc=f"{total_label}: {stage}", leave=False)
        bar.n = done
        bar.refresh()
        if done >= total:
            bar.close()

    return progress


class Model:
    """A loaded transformer: `config`, `tokenizer`, and `run` / `generate` / `atlas`.

    Made by headscope.load(). Several Python threads may share one Model: the GIL is released
    while the model works, and one forward pass runs at a time (each already uses every core).
    """

    def __init__(self, core: _core.Model) -> None:
        self._core = core
        #: The core's description of the model, as GET /api/model serves it without the server's
        #: limits and corpus evidence: hyper-parameters, statistics and role catalogues.
        self.description: dict = _json.loads(core.description())
        self.config = Config._of(self.description, core)
        self.tokenizer = Tokenizer(core, self.config.name)
        self.path: str = core.path
        #: What the load found suspect but not fatal (e.g. a tensor holding NaN), one line each.
        self.warnings: list[str] = list(core.warnings)

    def __repr__(self) -> str:
        c = self.config
        return f"<headscope.Model {c.name}: {c.architecture}, {c.n_layer} layers x {c.n_head} heads, d_model {c.d_model}>"

    @property
    def corpus_source(self) -> str:
        """What the cached corpus evidence of this model measured ("" when none is cached):
        the syntax and coreference evidence (and the induction probe) that Model.run joins
        into the roles. `make evidence` or `headscope run --measure-corpus` fills the cache."""
        return self._core.corpus_source

    def run(
        self,
        text_or_ids: str | bytes | Sequence[int],
        *,
        capture: Iterable[Capture] = ("attention",),
        words: bool = False,
        maps: Literal["auto", "dense", "stream"] = "auto",
        truncate: bool = False,
        probe: bool = True,
        corpus: bool = True,
    ) -> Result:
        """Run one text through the model and analyse every head.

        text_or_ids: the text (str, or UTF-8 bytes), or token ids (taken as they are: no template
            is added; ids the template adds, such as [CLS], count as special).
        capture: the arrays to keep besides the statistics (see Result):
            "attention"      [layer, head, q, k]  (n_layer, n_head, T, T)
            "head_outputs"   [n_layer, n_head, T, d_head]
            "contributions"  [n_layer, n_head, T, d_model]
            "hidden_states"  [n_layer + 1, T, d_model]
            "queries", "keys" (together)  [n_layer, n_head, T, d_head], [n_layer, n_kv_head, T, d_head]
        words: statistics, roles and json() over words (pieces merged) instead of tokens.
        maps: "dense" keeps every [T, T] map; "stream" hands each layer's maps to the statistics
            block by block and keeps none (memory grows with T, not T^2: read maps with
            Result.tile); "auto" is dense while the maps fit in 512 MiB.
        truncate: keep the first max_positions tokens of a longer text instead of raising Error.
        probe: label induction and duplicate-token heads with the model's repeated-random-tokens
            probe. The cached corpus evidence holds it; without a cache it is measured on the
            first run (a few seconds) and reused.
        corpus: join the cached corpus evidence (syntax, coreference, and its probe) into the
            roles, as `headscope run` does; without a cache (`make evidence`) there is none.

        Raises Error for text the model cannot take (invalid UTF-8, longer than max_positions,
        ids outside the vocabulary) and ResourceError when the run would not fit in memory.
        """
        capture = tuple(capture)
        if isinstance(text_or_ids, (str, bytes)):
            text, ids = _utf8(text_or_ids), None
        else:
            ids = []
            for i, x in enumerate(text_or_ids):
                if isinstance(x, (bool, float)) or not isinstance(x, (int, np.integer)):
                    raise Error(f"ids[{i}] = {x!r} is not an integer token id")
                if not -(2**62) < int(x) < 2**62:
                    raise Error(f"ids[{i}] = {x} is outside the vocabulary of {self.config.name} (0..{self.config.vocab_size - 1})")
                ids.append(int(x))
            text = None
        core = self._core.run(text, ids, list(capture), words, maps, truncate, probe, corpus)
        return Result(self, core, words)

    def generate(
        self,
        prompt: str | bytes,
        max_new_tokens: int = 20,
        *,
        max_length: int = 0,
        stop_at_eos: bool = True,
        capture_attention: bool = False,
        on_token: Callable[[int, int, str, float], None] | None = None,
        progress: bool = False,
    ) -> Generation:
        """Greedy continuation of `prompt` through the KV cache (decoders; encoders raise Error).

        max_length: prompt + continuation in tokens (0: the model's max_positions).
        on_token(position, id, entry, logit) is called after each new token; progress=True shows
        a tqdm bar when tqdm is installed.
        """
        callback = on_token
        if progress:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                bar = tqdm(total=max_new_tokens, desc="generate", leave=False)

                def callback(position: int, id: int, entry: str, logit: float) -> None:
                    bar.update(1)
                    if on_token is not None:
                        on_token(position, id, entry, logit)

        try:
            d = self._core.generate(_utf8(prompt, "prompt"), int(max_new_tokens), int(max_length), stop_at_eos,
                                    capture_attention, callback)
        finally:
            if progress and callback is not on_token:
                bar.close()
        return Generation(
            prompt_tokens=d["prompt_tokens"],
            ids=list(d["ids"]),
            generated=[tuple(t) for t in d["generated"]],
            continuation=_text(d["continuation"]),
            stopped_at_eos=d["stopped_at_eos"],
            stopped_at_limit=d["stopped_at_limit"],
            attention=d["attention"],
        )

    def atlas(
        self,
        data_dir: str | os.PathLike | None = None,
        *,
        max_sentences: int = 0,
        max_gap_rows: int = 0,
        importance_texts: int = -1,
        progress: Callable[[str, int, int], None] | bool = True,
    ) -> dict[str, Any]:
        """The corpus atlas of this model (what `headscope atlas` writes, docs/atlas.md).

        data_dir holds ud/en_pud-ud-test.conllu, ud/en_ewt-ud-dev.conllu and optionally
        gap/gap-{validation,development}.tsv (default: $HEADSCOPE_DATA, else ../shared/data).
        max_sentences / max_gap_rows: read only the first ones (0: all). progress: a callable
        (stage, done, total), or True for a tqdm bar when tqdm is installed.
        Returns {"json": the parsed atlas, "markdown": str, "png": bytes, "seconds": float}.
        """
        if data_dir is None:
            data_dir = os.environ.get("HEADSCOPE_DATA") or "../shared/data"
        callback = _tqdm_progress("atlas") if progress is True else (progress or None)
        d = self._core.atlas(os.fspath(data_dir), max_sentences, max_gap_rows, importance_texts, callback)
        return {"json": _json.loads(d["json"]), "markdown": d["markdown"], "png": d["png"], "seconds": d["seconds"]}

    def ablate(
        self,
        texts: str | bytes | Iterable[str | bytes],
        heads: Iterable[tuple[int, int]],
        *,
        mode: str = "zero",
        reference: Iterable[str | bytes] = (),
        seed: int = 0,
    ) -> dict[str, Any]:
        """What removing `heads` (0-based (layer, head) pairs) together does to the texts (docs/causal.md).

        mode: "zero", "mean" or "resample"; reference: the texts mean and resample take head outputs
        from (default: the texts themselves). Returns the result `headscope ablate --heads` writes:
        {"heads", "effect", "texts": [{"tokens", "layer_change", ...}]}, each text's effect with
        "next_before" / "next_after" {"id", "text", "p"} for decoders.
        """
        items = [texts] if isinstance(texts, (str, bytes)) else list(texts)
        pairs = [(int(layer), int(head)) for layer, head in heads]
        d = self._core.ablate([_utf8(t) for t in items], pairs, mode, [_utf8(t, "reference") for t in reference],
                              int(seed))
        return _json.loads(d)

    def importance(self, texts: str | bytes | Iterable[str | bytes]) -> dict[str, Any]:
        """Every head zero-ablated alone over the texts, ranked (what POST /api/importance replies).

        Returns {"shape", "tokens", "mode", "measure", "unit", "importance": [{"layer", "head",
        "ablation", "proxy", "rank"}, ...] (layer-major), "spearman", "seconds"}; ranks and Spearman's
        rho come from the core.
        """
        items = [texts] if isinstance(texts, (str, bytes)) else list(texts)
        return _json.loads(self._core.importance([_utf8(t) for t in items]))

    def corpus(
        self,
        texts: Iterable[str | bytes],
        *,
        ids: Iterable[Any] | None = None,
        records: bool = True,
        words: bool = False,
        batch_tokens: int = 2048,
        truncate: bool = False,
        probe: bool = True,
        corpus: bool = True,
        progress: bool | Callable[[int, int, int], None] | None = None,
    ) -> CorpusResult:
        """Every text analysed, many per forward pass (packed; docs/corpus.md).

        Returns a CorpusResult: ``records``, a DataFrame with one row per text × head (statistics,
        role, links on the text; ``records=False`` skips it), ``stats``, the corpus's CorpusStats
        (a partial that merges exactly), and ``failures`` ({"text", "id", "error"} for each text
        that could not be analysed; the others complete). ``progress``: a callable (done, total,
        failed) after every pass, or True for a tqdm bar.
        """
        from .corpus import run_corpus

        items = [texts] if isinstance(texts, (str, bytes)) else list(texts)
        return run_corpus(self._core, items, ids, records=records, words=words, batch_tokens=batch_tokens,
                          truncate=truncate, probe=probe, corpus=corpus, progress=progress)

    def patch(
        self,
        *,
        clean: str | bytes | None = None,
        corrupt: str | bytes | None = None,
        answer: str | bytes | None = None,
        wrong: str | bytes | None = None,
        pairs: Iterable[dict | Sequence[str]] | str | os.PathLike | None = None,
        task: Literal["ioi", "induction", "greater_than"] | None = None,
        n: int = 20,
        seed: int = 0,
        length: int = 10,
        sites: PatchSite | str | Iterable[PatchSite] = "head",
        direction: Literal["denoise", "noise"] | None = None,
        metric: Literal["logit_diff", "prob", "loss", "cosine"] | None = None,
        layers: int | Iterable[int] | None = None,
        heads: HeadSpec | None = None,
        senders: HeadSpec | None = None,
        receivers: HeadSpec | None = None,
        input: Literal["q", "k", "v", "logits"] = "q",
        method: Literal["exact", "attribution", "both"] = "exact",
        edges: bool = False,
    ) -> PatchResult:
        """Activation patching between a clean and a corrupted prompt (`headscope patch`, the same
        pipeline and JSON; docs/python.md, "Patching").

        The prompt pairs, one of three ways:
            clean, corrupt, answer, wrong: one pair (answer and wrong: decoders only, one token
                each as it follows the prompt, e.g. " Mary" and " John");
            pairs: a list of dicts {"clean", "corrupt", "answer", "wrong"[, "variant"]} or tuples
                (clean, corrupt, answer, wrong) ((clean, corrupt) for an encoder), e.g. a PromptPairs
                from ioi_pairs(); or the path of a pairs file (write_pairs, `headscope patch
                --write-pairs`);
            task: "ioi", "induction" or "greater_than", `n` pairs drawn with `seed` (induction:
                `length` random tokens per half).
        Every pair's prompts must be the same number of tokens.

        The experiment, one of three:
            a sweep (default): every site of `sites` ("head", "head_position", "q", "k", "v",
                "pattern", "resid", "attn", "mlp"; a list or a comma-separated str) in `layers`
                (default all), one result each;
            heads: these heads' outputs patched together, one result ("9.6,9.9", (9, 6) or
                [(9, 6), (9, 9)]);
            senders: path patching from the sender heads into `receivers` (together; default every
                later head, one at a time) through their `input` ("q", "k", "v", or "logits" for
                the senders' direct effect).
        direction: "denoise" (the corrupted run given clean values; the default of sweeps and
            heads) or "noise" (the clean run given corrupted values; the default of path patching).
        metric: "logit_diff" (decoders' default), "prob", "loss"; encoders: "cosine" (their only one).
        method: "exact", "attribution" (Model.attribution_patch) or "both" (and their .agreement).

        Returns a PatchResult (.map() gives the results as an array). Raises Error for prompts of
        different token counts, a non-one-token answer, a head, layer or metric the model lacks.
        """
        source = _pair_source(self, (clean, corrupt, answer, wrong), pairs, task)
        raw, used = self._core.patch(
            *source, _count(n, "n"), _count(length, "length"), _seed(seed), _sites(sites), direction or "",
            metric or "", _layers(layers), _head_spec(heads, "heads"), _head_spec(senders, "senders"),
            _head_spec(receivers, "receivers"), input, method, bool(edges))
        return PatchResult(self, _json.loads(raw), PromptPairs._of(used))

    def attribution_patch(self, **kwargs: Any) -> PatchResult:
        """Attribution patching: Model.patch(..., method="attribution") (the same arguments, and
        edges=True for every head-to-head edge). Each result's value is the first-order estimate of
        the patched metric, base + (a_source - a_base) . d metric / d a (docs/gradients.md)."""
        kwargs.setdefault("method", "attribution")
        return self.patch(**kwargs)

    def grad(
        self,
        text: str | bytes,
        *,
        answer: str | bytes | None = None,
        wrong: str | bytes | None = None,
        reference: str | bytes | None = None,
        metric: Literal["logit_diff", "prob", "loss", "cosine"] | None = None,
        attention: bool = True,
        qkv: bool = True,
        receivers: bool = False,
    ) -> Gradients:
        """The gradient of a metric of `text` with respect to every activation the forward pass
        captures, from one forward and one backward pass (`headscope grad`; docs/gradients.md).

        Decoders: the metric is read after the last token, logit_diff of `answer` against `wrong`
        (default), "prob" or "loss" of `answer` (one token each, e.g. " Mary"); encoders: "cosine",
        1 - cos of the mean-pooled embedding with `reference`'s. Returns a Gradients whose arrays
        (float32) have the shapes of the run's captures: embeddings [T, d_model], hidden_states
        [n_layer + 1, T, d_model], head_outputs [n_layer, n_head, T, d_head], attention [n_layer,
        n_head, T, T], queries, keys, values, attn_output, mlp_outputs, final_residual and, with
        receivers=True, receivers [n_layer, n_head + 2 n_kv_head, T, d_model] (each head's query,
        key and value path back to the layer's input).
        """
        raw, arrays = self._core.grad(_utf8(text), metric or "", _utf8(answer or ""), _utf8(wrong or ""),
                                      _utf8(reference or ""), bool(attention), bool(qkv), bool(receivers))
        return Gradients(_json.loads(raw), arrays)

    def saliency(
        self,
        text: str | bytes,
        *,
        answer: str | bytes | None = None,
        wrong: str | bytes | None = None,
        reference: str | bytes | None = None,
        metric: Literal["logit_diff", "prob", "loss", "cosine"] | None = None,
        method: Literal["integrated_gradients", "grad_x_input"] = "integrated_gradients",
        steps: int = 50,
        rule: Literal["gausslegendre", "riemann_left", "riemann_right", "riemann_middle",
                      "riemann_trapezoid"] = "gausslegendre",
        baseline: int | None = None,
        keep_special: bool = True,
    ) -> Saliency:
        """How much each token of `text` moves the metric (`headscope saliency`; docs/gradients.md):
        gradient x input, or integrated gradients from a baseline (zero embeddings, or the embedding
        of token id `baseline` at every position; special tokens kept unless keep_special=False)
        with Captum's integration `rule` over `steps` points. The metric as Model.grad. Returns a
        Saliency: per-token .scores, .attributions [T, d_model], the metric at the text and the
        baseline, and the completeness gap |sum(scores) - (metric - baseline metric)|.
        """
        raw, attributions = self._core.saliency(
            _utf8(text), method, metric or "", _utf8(answer or ""), _utf8(wrong or ""), _utf8(reference or ""),
            _count(steps, "steps"), rule, -1 if baseline is None else int(baseline), bool(keep_special))
        return Saliency(_json.loads(raw), attributions)

    def logit_lens(
        self,
        text: str | bytes,
        position: int = -1,
        top_k: int = 10,
        tokens: Iterable[str | int] = (),
        *,
        logits: bool = False,
        truncate: bool = False,
    ) -> LogitLens:
        """The logit lens (decoders): the residual stream after every layer read through the model's
        final norm and unembedding at one position of `text` (-1: the last token, whose last row is
        then the model's own next-token prediction).

        Rows are n_layer + 1: row 0 reads the embeddings, row l the output of layer l - 1, row
        n_layer the model's logits. Kept per row: the `top_k` tokens with the largest logits
        (ids, decoded text, logit, probability), and for each of `tokens` (a token written as text,
        " Paris", exactly one token of the model's vocabulary; or an id) its logit, probability and
        rank (0 = the top token) at every row.
        logits=True also returns every logit, float32 [n_layer + 1, vocab_size]: 31 x 49,152 x 4 B =
        6 MB for SmolLM2, 19 x 262,144 x 4 B = 20 MB for Gemma 3; by default only the top tokens
        and the named ones are kept.

        Raises Error for an encoder (the lens needs a decoder), a position outside the text, a
        token that is not one token, or an id outside the vocabulary.
        """
        ids, position = self._lens_ids(tokens), self._lens_position(position)
        d = self._core.logit_lens(_utf8(text), position, _count(top_k, "top_k"), ids, bool(logits), truncate)
        return LogitLens._of(self, d, ids)

    def head_lens(
        self,
        text: str | bytes,
        layer: int,
        head: int,
        position: int = -1,
        top_k: int = 10,
        tokens: Iterable[str | int] = (),
        *,
        truncate: bool = False,
    ) -> HeadLens:
        """One head's logit lens (decoders): what head (`layer`, `head`), counted from 0, writes
        into the logits at one position of `text` (-1: the last token) — its output through W_O, its
        layer's output norm (Gemma 2/3, OLMo 2) and the final norm, each divided by the scale the
        model divided by at that position, then the unembedding (docs/circuits.md, "Logit lens").

        This is direct logit attribution for every token at once: effects[a] - effects[b] is the
        head's share of the logit difference a - b, and the effects of every part of the model add
        up to its logits (before a final soft-cap). Kept: the `top_k` tokens the head raises and
        lowers most, and for each of `tokens` (text, one token each, or ids; default the model's
        prediction) the head's effect, its rank among the head's effects (0 = raised most) and the
        model's own logit.

        Raises Error for an encoder, a head or position the model or text lacks, a token that is
        not one token, or an id outside the vocabulary.
        """
        ids, position = self._lens_ids(tokens), self._lens_position(position)
        for name, value in (("layer", layer), ("head", head)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= int(value) < 2**31:
                raise Error(f"{name} = {value!r} is not a {name} number counted from 0")
        d = self._core.head_lens(_utf8(text), int(layer), int(head), position, _count(top_k, "top_k"), ids, truncate)
        return HeadLens._of(self, int(layer), int(head), d)

    def _lens_ids(self, tokens: Iterable[str | int]) -> list[int]:
        """The ids of the tokens a lens follows: text (exactly one token each) or ids."""
        if not self.config.causal:
            return []  # the core refuses the model first, in its own words
        ids = []
        for i, t in enumerate(tokens if not isinstance(tokens, (str, bytes, int)) else [tokens]):
            if isinstance(t, (str, bytes)):
                ids.append(self._core.lens_token_id(_utf8(t, "token")))
            elif isinstance(t, (int, np.integer)) and not isinstance(t, bool):
                if not -(2**62) < int(t) < 2**62:
                    raise Error(f"tokens[{i}] = {t} is outside the vocabulary of {self.config.name}")
                ids.append(int(t))
            else:
                raise Error(f"tokens[{i}] = {t!r} is neither a token (str) nor a token id (int)")
        return ids

    @staticmethod
    def _lens_position(position: int) -> int:
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
            raise Error(f"position = {position!r} is not an integer")
        if not -(2**62) < int(position) < 2**62:
            raise Error(f"position = {position} is outside the text")
        return int(position)


    def composition(self, *, draws: int = 100, seed: int = 0, gains: bool = True) -> Composition:
        """Q-, K- and V-composition of every pair of heads in different layers, from the weights
        alone (Elhage et al. 2021; `headscope composition`, the same core and numbers; docs/circuits.md,
        "Composition scores").

        For a sender s and a receiver r in a later layer, with W_QK = W_Q^T W_K and W_OV = W_O W_V
        of each head and Frobenius norms: Q = |W_QK(r)^T W_OV(s)| / (|W_QK(r)| |W_OV(s)|), K the same
        with W_QK(r), V with W_OV(r) in its place. Every score is in [0, 1].
        draws: random heads of the model's shapes scored for the baseline (2 .. 100000), drawn
            with `seed` (any thread count gives the same numbers).
        gains: fold the norms' gains into the matrices next to them (default); False scores the
            weights as stored.
        RoPE is not included (W_QK at relative position 0); under grouped-query attention the heads
        of a group share W_K and W_V.

        Returns a Composition. Raises Error for a model with one layer or options out of range.
        """
        if not isinstance(gains, (bool, np.bool_)):
            raise Error(f"gains = {gains!r} is not True or False")
        return Composition(self, self._core.composition(_count(draws, "draws"), _seed(seed), bool(gains)))

    def head_map(self, texts: Sequence[str]) -> dict[str, Any]:
        """Every head placed by how alike its attention is to every other head's over ``texts``
        (Clark et al. 2019; the explorer's head map, docs/roles.md "Head map").

        Two heads' distance is the square root of the mean Jensen-Shannon divergence (bits) of their
        attention rows on the same query rows; ``x``, ``y`` are the classical multidimensional
        scaling of those distances. Returns the "headscope.head_map/1" dict with ``distance`` as a
        float64 array [N, N] (N = n_layer * n_head, head i = layer * n_head + head) and
        ``frame``: a DataFrame with a row per head (layer, head, kv_head, x, y) when pandas is there.
        """
        if isinstance(texts, str) or not texts:
            raise Error("head_map needs a list of texts")
        result = _json.loads(self._core.head_map([str(t) for t in texts]))
        result["distance"] = np.asarray(result["distance"], dtype=np.float64)
        try:
            import pandas as pd

            result["frame"] = pd.DataFrame(result["heads"])
        except ImportError:  # pragma: no cover
            pass
        return result


def load(path: str | os.PathLike, *, threads: int | None = None, strict: bool = False) -> Model:
    """Load a model: a Hugging Face directory (config.json, *.safetensors, tokenizer.json) or a .gguf file.

    threads: worker threads for this model's runs (default: all cores, or OMP_NUM_THREADS).
    strict: refuse weights holding NaN or Inf (by default they load, named in Model.warnings).

    Raises FileError when the path does not exist, Error for anything else wrong with the files.
    """
    return Model(_core.load(os.fspath(path), threads, strict))


# ---- circuits: prompt pairs, activation and path patching, the logit lens ----


def _count(x: Any, what: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise Error(f"{what} = {x!r} is not an integer")
    if not -(2**31) <= int(x) < 2**31:
        raise Error(f"{what} = {x} is out of range")
    return int(x)


def _seed(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= int(x) < 2**64:
        raise Error(f"seed = {x!r}: give an integer from 0 to 2**64 - 1")
    return int(x)


def _sites(sites: Any) -> list[str]:
    items = sites.split(",") if isinstance(sites, str) else list(sites)
    for s in items:
        if not isinstance(s, str):
            raise Error(f"sites: {s!r} is not a site name (head, head_position, q, k, v, pattern, resid, attn, mlp)")
    return [s.strip() for s in items]


def _layers(layers: Any) -> list[int]:
    if layers is None:
        return []
    items = [layers] if isinstance(layers, (int, np.integer)) else list(layers)
    if not items:
        raise Error("layers: the list is empty; give at least one layer, or None for every layer")
    return [_count(x, "layers item") for x in items]


def _head_spec(heads: Any, what: str) -> str:
    """Heads as the CLI writes them, "layer.head,layer.head", for the core to check (parse_heads)."""
    if heads is None:
        return ""
    if isinstance(heads, str):
        if not heads:
            raise Error(f"{what}: the head list is empty")
        return heads
    items = list(heads)
    if len(items) == 2 and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in items):
        items = [tuple(items)]  # one head, (layer, head)
    out = []
    for h in items:
        if isinstance(h, str):
            out.append(h)
            continue
        if not isinstance(h, (tuple, list)) or len(h) != 2:
            raise Error(f"{what}: {h!r} is not a (layer, head) pair")
        layer, head = (_count(x, what) for x in h)
        out.append(f"{layer}.{head}")
    if not out:
        raise Error(f"{what}: the head list is empty")
    return ",".join(out)


_PAIR_FIELDS = ("clean", "corrupt", "answer", "wrong", "variant")


def _pair_source(model: Model, one: tuple, pairs: Any, task: Any) -> tuple:
    """Model.patch's prompt pairs as the core takes them: the one pair's four texts (UTF-8), a pairs
    document and its name for messages, and the task; exactly one of the three ways given."""
    pairs_json, pairs_name = "", ""
    if pairs is not None:
        if isinstance(pairs, (str, os.PathLike)):
            pairs_name = os.fspath(pairs)
            with open(pairs_name, encoding="utf-8") as f:
                pairs_json = f.read()
        else:
            pairs_json, pairs_name = _pairs_document(pairs, causal=model.config.causal), "pairs"
    if task is not None and not isinstance(task, str):
        raise TypeError(f"task must be a str, not {type(task).__name__}")
    given = any(x is not None for x in one) + (pairs is not None) + (task is not None)
    if given != 1:
        raise Error("give the prompt pairs one way: clean= and corrupt= (decoders: with answer= and wrong=), "
                    "pairs=, or task= (ioi, induction, greater_than)")
    texts = [_utf8(x or "", what) for x, what in zip(one, _PAIR_FIELDS)]
    return (*texts, pairs_json, pairs_name, task or "")


def _pair_dict(pair: Any, i: int, causal: bool) -> dict:
    if isinstance(pair, dict):
        d = dict(pair)
    elif isinstance(pair, (tuple, list)) and len(pair) in ((2, 4, 5) if not causal else (4, 5)):
        d = dict(zip(_PAIR_FIELDS, pair))
    else:
        want = "(clean, corrupt, answer, wrong)" + ("" if causal else " or (clean, corrupt)")
        raise Error(f"pairs[{i}]: {pair!r} is not a dict or a tuple {want}")
    if not causal:  # an encoder's metric compares embeddings: no answer tokens
        d.setdefault("answer", "")
        d.setdefault("wrong", "")
    return {k: v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v for k, v in d.items()}


def _pairs_document(pairs: Iterable[Any], *, causal: bool = True) -> str:
    task = getattr(pairs, "task", "custom")
    seed = getattr(pairs, "seed", 0)
    model = getattr(pairs, "model", "")
    items = [_pair_dict(p, i, causal) for i, p in enumerate(pairs)]
    return _json.dumps({"task": task, "seed": seed, "model": model, "pairs": items})


class PromptPairs(list):
    """Prompt pairs for patching: a list of dicts {"clean", "corrupt", "answer", "wrong",
    "variant"}, with the task that made them ("ioi", "induction", "greater_than" or "custom"),
    its seed and the model whose tokenizer they were checked with. ioi_pairs(),
    induction_pairs(), greater_than_pairs() and read_pairs() return one; Model.patch(pairs=...)
    and write_pairs() take one (or any list of dicts or tuples)."""

    task: str
    seed: int
    model: str

    def __init__(self, pairs: Iterable[dict] = (), *, task: str = "custom", seed: int = 0, model: str = "") -> None:
        super().__init__(pairs)
        self.task, self.seed, self.model = task, seed, model

    @classmethod
    def _of(cls, document: str) -> PromptPairs:
        d = _json.loads(document)
        return cls(d["pairs"], task=d["task"], seed=d["seed"], model=d["model"])

    def json(self) -> str:
        """The pairs file's JSON, as `headscope patch --write-pairs` writes it and --pairs reads it."""
        return _core.read_pairs(_pairs_document(self), "pairs")

    def __repr__(self) -> str:
        model = f", {self.model}" if self.model else ""
        return f"<headscope.PromptPairs {self.task}, {len(self)} pair(s), seed {self.seed}{model}>"


def ioi_pairs(model: Model, n: int = 20, seed: int = 0) -> PromptPairs:
    """`n` indirect-object-identification pairs for `model`'s tokenizer ("When Mary and John went to
    the store, John gave a drink to" -> " Mary"; corrupted with three other names), balanced between
    the ABBA and BABA orders; the same model and seed give the same pairs (`headscope patch --task ioi`)."""
    return PromptPairs._of(model._core.make_pairs("ioi", _count(n, "n"), 10, _seed(seed)))


def induction_pairs(model: Model, n: int = 20, seed: int = 0, length: int = 10) -> PromptPairs:
    """`n` induction pairs: `length` random one-token words repeated (the answer: the word that
    followed the last one in the first half), corrupted by a second half that does not repeat."""
    document = model._core.make_pairs("induction", _count(n, "n"), _count(length, "length"), _seed(seed))
    return PromptPairs._of(document)


def greater_than_pairs(model: Model, n: int = 20, seed: int = 0) -> PromptPairs:
    """`n` greater-than pairs ("The war lasted from the year 1732 to the year 17"), corrupted with a
    year ending in 0x; the answer is the next token of a later year."""
    return PromptPairs._of(model._core.make_pairs("greater_than", _count(n, "n"), 10, _seed(seed)))


def read_pairs(path: str | os.PathLike) -> PromptPairs:
    """A prompt-pairs file (write_pairs, `headscope patch --write-pairs`); Error names what is wrong."""
    name = os.fspath(path)
    with open(name, encoding="utf-8") as f:
        return PromptPairs._of(_core.read_pairs(f.read(), name))


def write_pairs(path: str | os.PathLike, pairs: Iterable[dict | Sequence[str]]) -> None:
    """Write prompt pairs as the file `headscope patch --pairs` and read_pairs() read (checked first)."""
    text = _core.read_pairs(_pairs_document(pairs), "pairs")
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(text)


def _heads_text(heads: list) -> str:
    return ",".join(f"{layer}.{head}" for layer, head in heads) or "logits"


class Gradients:
    """What Model.grad returns: the "headscope.grad/1" document as `raw` and every gradient as a
    float32 array (attributes named as the capture's tensors: embeddings, hidden_states,
    final_residual, head_outputs, attn_output, mlp_outputs, attention, queries, keys, values,
    receivers; None when not asked for) and the token embeddings the pass ran."""

    NAMES = ("embeddings", "hidden_states", "final_residual", "head_outputs", "attn_output", "mlp_outputs",
             "attention", "queries", "keys", "values", "receivers", "token_embeddings")

    def __init__(self, raw: dict, arrays: dict) -> None:
        self.raw = raw
        self.metric: str = raw["metric"]
        self.value: float = _num(raw["value"])
        self.tokens: list[dict] = raw["tokens"]
        for name in self.NAMES:
            setattr(self, name, arrays.get(name))

    def grad_x_input(self) -> np.ndarray:
        """Per token: its embedding times the gradient there, summed over the embedding (float64 [T])."""
        return (self.embeddings.astype(np.float64) * self.token_embeddings).sum(-1)

    def __repr__(self) -> str:
        return f"<headscope.Gradients {self.metric} = {self.value:.6g}, {len(self.tokens)} tokens>"


class Saliency:
    """What Model.saliency returns: the "headscope.saliency/1" document as `raw`, per-token
    `scores` (float64 [T]), `attributions` (float32 [T, d_model]), `value` (the metric at the
    text), and for integrated gradients `baseline_value` and `completeness_gap`."""

    def __init__(self, raw: dict, attributions: np.ndarray) -> None:
        self.raw = raw
        self.method: str = raw["method"]
        self.tokens: list[dict] = raw["tokens"]
        self.scores = np.array([_num(t["score"]) for t in raw["tokens"]], dtype=np.float64)
        self.attributions = attributions
        self.value: float = _num(raw["value"])
        self.baseline_value: float | None = _num(raw["baseline_value"]) if "baseline_value" in raw else None
        self.completeness_gap: float | None = _num(raw["completeness_gap"]) if "completeness_gap" in raw else None

    def __repr__(self) -> str:
        return f"<headscope.Saliency {self.method}, {len(self.tokens)} tokens, total {self.scores.sum():.6g}>"


class PatchResult:
    """What Model.patch returns: the experiment's JSON (`headscope patch --json`, schema
    "headscope.patch/1") as `raw`, and its parts.

    clean, corrupt  the unpatched runs' metric (means over the pairs)
    metric          "logit_diff", "prob", "loss" or "cosine"
    direction       "denoise" or "noise"
    results         a sweep's results, one dict per site patched: {"site", "layer", "head",
                    "position", "value", "normalised"} (k, v: also "group", the query heads reading
                    that key/value head); path patching: {"receivers", "value", "normalised"}
    path            path patching: {"senders", "receivers", "input", "results", ...}, else None
    set             heads patched together: {"heads", "value", "normalised"}, else None
    pairs           the PromptPairs that ran

    normalised = (value - corrupt) / (clean - corrupt): 1 the clean behaviour, 0 the corrupted one;
    NaN where clean == corrupt.
    """

    def __init__(self, model: Model, raw: dict, pairs: PromptPairs) -> None:
        self.model = model
        self.raw: dict = raw
        self.pairs = pairs
        self.metric: str = raw["metric"]
        self.direction: str = raw["direction"]
        self.clean: float = _num(raw["clean"])
        self.corrupt: float = _num(raw["corrupt"])
        self.n_pairs: int = raw["n_pairs"]
        self.n_tokens: int | None = raw.get("n_tokens")
        self.path: dict | None = raw.get("path")
        self.set: dict | None = raw.get("set")
        self.method: str = raw.get("method", "exact")
        attribution = raw.get("attribution") or {}
        self.estimates: list[dict] = attribution.get("results", [])
        self.edges: list[dict] = attribution.get("edges", [])
        self.agreement: dict | None = raw.get("agreement")
        for r in self.estimates:
            r["value"], r["normalised"] = _num(r["value"]), _num(r["normalised"])
        if self.path is not None:
            self.results: list[dict] = self.path["results"]
        else:
            self.results = raw.get("results", [])
        for r in self.results:
            r["value"], r["normalised"] = _num(r["value"]), _num(r["normalised"])

    def __repr__(self) -> str:
        kind = "path patching" if self.path is not None else "heads together" if self.set is not None else "sweep"
        return (f"<headscope.PatchResult {kind}, {self.n_pairs} pair(s), {self.direction}, {self.metric}: "
                f"clean {self.clean:.4g}, corrupt {self.corrupt:.4g}, {len(self.results)} result(s)>")

    @property
    def sites(self) -> list[str]:
        """The sites a sweep patched, in the order asked ([] for path patching and heads together)."""
        return list(dict.fromkeys(r["site"] for r in self.results)) if self.path is None else []

    def edge_frame(self) -> Any:
        """The edges of attribution patching (edges=True) as a DataFrame: sender_layer, sender_head,
        receiver_layer, receiver_head (a key/value head for k and v; -1 for the logits), input,
        value (the estimated change of the metric), normalised."""
        import pandas as pd

        rows = [(e["sender"][0], e["sender"][1], *(e["receiver"] or (self.model.config.n_layer, -1)), e["input"],
                 _num(e["value"]), _num(e["normalised"])) for e in self.edges]
        return pd.DataFrame(rows, columns=["sender_layer", "sender_head", "receiver_layer", "receiver_head", "input",
                                           "value", "normalised"])

    def map(self, site: PatchSite | None = None, normalised: bool = True, estimate: bool = False) -> np.ndarray:
        """The results of one site as a float64 array, NaN where nothing was patched (layers left out):

        head, q, pattern  [n_layer, n_head]
        k, v              [n_layer, n_kv_head]
        resid             [n_layer, n_tokens]   (the residual stream entering each layer)
        attn, mlp         [n_layer]
        head_position     [n_layer, n_head, n_tokens]
        path patching     [n_layer, n_head]: each receiver patched alone (site: None)

        site: default the sweep's first site. normalised=False gives the raw metric of each
        patched run instead of (value - corrupt) / (clean - corrupt). estimate=True (method "both")
        gives attribution patching's estimates instead of the exact results.
        """
        if estimate and self.method == "both":
            return PatchResult(self.model, {**self.raw, "results": self.estimates, "method": "attribution"},
                               self.pairs).map(site, normalised)
        c = self.model.config
        key = "normalised" if normalised else "value"
        if self.set is not None:
            raise Error('heads patched together give one result: read .set["normalised"] (no map)')
        if self.path is not None:
            if site not in (None, "head"):
                raise Error(f"path patching results are per receiver head: map() takes no site ({site!r})")
            out = np.full((c.n_layer, c.n_head), np.nan)
            for r in self.results:
                if not r["receivers"]:
                    raise Error(f'path patching to the logits is one result: read .path["{key}"] (no map)')
                if len(r["receivers"]) != 1:
                    raise Error(f"path patching into {_heads_text(r['receivers'])} together is one result: read "
                                f'.path["{key}"] (map() needs each receiver patched alone: receivers=None)')
                layer, head = r["receivers"][0]
                out[layer, head] = r[key]
            return out
        sites = self.sites
        if site is None:
            if not sites:
                raise Error("the sweep has no results")
            site = sites[0]
        if site not in sites:
            raise Error(f"site {site!r} was not patched in this sweep (patched: {', '.join(sites)})")
        T = self.n_tokens
        shape = {"head": (c.n_layer, c.n_head), "q": (c.n_layer, c.n_head), "pattern": (c.n_layer, c.n_head),
                 "k": (c.n_layer, c.n_kv_head), "v": (c.n_layer, c.n_kv_head), "resid": (c.n_layer, T),
                 "attn": (c.n_layer,), "mlp": (c.n_layer,), "head_position": (c.n_layer, c.n_head, T)}[site]
        out = np.full(shape, np.nan)
        for r in self.results:
            if r["site"] != site:
                continue
            if site in ("attn", "mlp"):
                out[r["layer"]] = r[key]
            elif site == "resid":
                out[r["layer"], r["position"]] = r[key]
            elif site == "head_position":
                out[r["layer"], r["head"], r["position"]] = r[key]
            else:
                out[r["layer"], r["head"]] = r[key]
        return out

    def to_frame(self) -> pandas.DataFrame:
        """The results as a pandas DataFrame, one row per result: a sweep's site, layer, head,
        position (None where the site has none), value and normalised; path patching's receivers
        ("layer.head,..." or "logits"), input, value and normalised; heads together one row."""
        pd = _pandas("PatchResult.to_frame() needs")
        if self.set is not None:
            return pd.DataFrame([{"heads": _heads_text(self.set["heads"]), "value": _num(self.set["value"]),
                                  "normalised": _num(self.set["normalised"])}])
        if self.path is not None:
            return pd.DataFrame([{"receivers": _heads_text(r["receivers"]), "input": self.path["input"],
                                  "value": r["value"], "normalised": r["normalised"]} for r in self.results],
                                columns=["receivers", "input", "value", "normalised"])
        columns = ["site", "layer", "head", "position", "value", "normalised"]
        if any("group" in r for r in self.results):
            columns.append("group")
        frame = pd.DataFrame([{k: r.get(k) for k in columns} for r in self.results], columns=columns)
        return frame.astype({"layer": "int64", "head": "Int64", "position": "Int64"})  # None: <NA>


@dataclass(frozen=True)
class LogitLens:
    """What Model.logit_lens returns, read at one position. R = n_layer + 1 rows: row 0 the
    embeddings, row l the residual stream after layer l - 1, row n_layer the model's own logits.

    top_ids, top_logits, top_probs    [R, top_k] (int32, float32, float32): each row's tokens with
                                      the largest logits, largest first; top_text the decoded tokens
    token_ids                         the tokens asked for (Model.logit_lens's `tokens`), as ids
    token_logits, token_probs         [R, len(token_ids)] float32; token_ranks [R, len(token_ids)]
                                      int64, 0 for the top token (ties share the smaller rank)
    logits                            [R, vocab_size] float32 with logits=True, else None
    Probabilities are the softmax over the whole vocabulary of each row.
    """

    tokens: list[str]  # the text's tokens (vocabulary entries)
    ids: list[int]
    position: int  # the position read, 0 .. T - 1
    truncated: bool
    top_ids: np.ndarray
    top_text: list[list[str]]
    top_logits: np.ndarray
    top_probs: np.ndarray
    token_ids: list[int]
    token_logits: np.ndarray
    token_probs: np.ndarray
    token_ranks: np.ndarray
    logits: np.ndarray | None

    @classmethod
    def _of(cls, model: Model, d: dict, token_ids: list[int]) -> LogitLens:
        enc = _encoding(d["encoding"])
        rows = d["n_rows"]
        top_ids = np.asarray(d["top_ids"], dtype=np.int32).reshape(rows, -1)
        n = len(token_ids)
        decode = functools.lru_cache(maxsize=None)(lambda i: model.tokenizer.decode([i]))
        return cls(
            tokens=enc.tokens,
            ids=enc.ids,
            position=d["position"],
            truncated=d["truncated"],
            top_ids=top_ids,
            top_text=[[decode(int(i)) for i in row] for row in top_ids],
            top_logits=np.asarray(d["top_logits"], dtype=np.float32).reshape(rows, -1),
            top_probs=np.asarray(d["top_probs"], dtype=np.float32).reshape(rows, -1),
            token_ids=list(token_ids),
            token_logits=np.asarray(d["token_logits"], dtype=np.float32).reshape(rows, n),
            token_probs=np.asarray(d["token_probs"], dtype=np.float32).reshape(rows, n),
            token_ranks=np.asarray(d["token_ranks"], dtype=np.int64).reshape(rows, n),
            logits=d["logits"],
        )

    def __repr__(self) -> str:
        return (f"<headscope.LogitLens {self.top_ids.shape[0]} rows at position {self.position}: "
                f"last row's top token {self.top_text[-1][0]!r}>")


@dataclass(frozen=True)
class HeadLens:
    """What Model.head_lens returns: one head's direct effect on every logit at one position.

    effects                  float64 [vocab_size]: the head's output read through the unembedding
                             (norms at the run's own scales); effects[a] - effects[b] is its direct
                             logit attribution of a against b
    promoted, suppressed     the top_k tokens it raises / lowers most: DataFrames via to_frame(), or
                             the *_ids / *_effects lists
    token_ids, token_effects, token_ranks, token_model_logits
                             the followed tokens: the head's effect, its rank among the head's
                             effects (0 = raised most), and the model's own logit (before a soft-cap)
    followed_prediction      True when no tokens were asked and the model's prediction is followed
    """

    tokens: list[str]
    ids: list[int]
    position: int
    truncated: bool
    layer: int
    head: int
    kv_head: int
    effects: np.ndarray
    promoted_ids: list[int]
    promoted_text: list[str]
    promoted_effects: list[float]
    suppressed_ids: list[int]
    suppressed_text: list[str]
    suppressed_effects: list[float]
    token_ids: list[int]
    token_text: list[str]
    token_effects: list[float]
    token_ranks: list[int]
    token_model_logits: list[float]
    followed_prediction: bool

    @classmethod
    def _of(cls, model: Model, layer: int, head: int, d: dict) -> HeadLens:
        enc = _encoding(d["encoding"])
        decode = functools.lru_cache(maxsize=None)(lambda i: model.tokenizer.decode([i]))
        return cls(
            tokens=enc.tokens, ids=enc.ids, position=d["position"], truncated=d["truncated"], layer=layer, head=head,
            kv_head=d["kv_head"], effects=d["effects"],
            promoted_ids=list(d["promoted_ids"]), promoted_text=[decode(i) for i in d["promoted_ids"]],
            promoted_effects=list(d["promoted_effects"]),
            suppressed_ids=list(d["suppressed_ids"]), suppressed_text=[decode(i) for i in d["suppressed_ids"]],
            suppressed_effects=list(d["suppressed_effects"]),
            token_ids=list(d["token_ids"]), token_text=[decode(i) for i in d["token_ids"]],
            token_effects=list(d["token_effects"]), token_ranks=list(d["token_ranks"]),
            token_model_logits=list(d["token_model_logits"]), followed_prediction=d["followed_prediction"],
        )

    def to_frame(self) -> pandas.DataFrame:
        """One row per listed token: kind (raised, lowered, followed), id, text, effect, rank."""
        pd = _pandas("HeadLens.to_frame() needs")
        rank = lambda i: int((self.effects > self.effects[i]).sum())  # noqa: E731
        rows = [("raised", i, t, e, rank(i)) for i, t, e in
                zip(self.promoted_ids, self.promoted_text, self.promoted_effects)]
        rows += [("lowered", i, t, e, rank(i)) for i, t, e in
                 zip(self.suppressed_ids, self.suppressed_text, self.suppressed_effects)]
        rows += list(zip(["followed"] * len(self.token_ids), self.token_ids, self.token_text, self.token_effects,
                         self.token_ranks))
        return pd.DataFrame(rows, columns=["kind", "id", "text", "effect", "rank"])

    def __repr__(self) -> str:
        top = ", ".join(f"{t!r} {e:+.2f}" for t, e in zip(self.promoted_text[:3], self.promoted_effects[:3]))
        return f"<headscope.HeadLens {self.layer}.{self.head} at position {self.position}: raises {top}>"


_KINDS = ("Q", "K", "V")


class Composition:
    """What Model.composition returns: the composition scores of every pair of heads.

    q, k, v     float32 [n_layer, n_head, n_layer, n_head], read-only: element [l1, h1, l2, h2] is
                the score of sender (l1, h1) into receiver (l2, h2); 0 wherever l2 <= l1 (no path
                from a head into its own or an earlier layer)
    baseline    {"Q": (mean, std), "K": ..., "V": ...}: the same score of random Gaussian heads of
                the model's shapes over `draws` draws (std with n - 1); a score well above the mean
                is what the weights chose, not chance
    draws, seed, gains   the options the scores were computed with
    seconds     {"scores", "baseline" (wall), "cpu" (both, all threads)}

    top(kind, n) the n highest pairs of a kind; grid(kind) the scores as a square matrix for
    plotting; raw the JSON of `headscope composition --json`; to_frame() one row per pair.
    """

    def __init__(self, model: Model, core: _core.Composition) -> None:
        self.model = model
        self._core = core
        self.q: np.ndarray = core.q
        self.k: np.ndarray = core.k
        self.v: np.ndarray = core.v
        self.baseline: dict[str, tuple[float, float]] = {kind: core.baseline(kind) for kind in _KINDS}
        wall, baseline, cpu = core.seconds
        self.seconds = {"scores": wall, "baseline": baseline, "cpu": cpu}
        self.draws: int
        self.seed: int
        self.gains: bool
        self.draws, self.seed, self.gains = core.options

    def __repr__(self) -> str:
        c = self.model.config
        best = {kind: self.top(kind, 1)[0]["score"] for kind in _KINDS}
        return (f"<headscope.Composition {c.name}: {c.n_layer} layers x {c.n_head} heads; highest Q {best['Q']:.3f}, "
                f"K {best['K']:.3f}, V {best['V']:.3f}; random mean {self.baseline['Q'][0]:.4f}>")

    def scores(self, kind: Literal["Q", "K", "V"]) -> np.ndarray:
        """The [n_layer, n_head, n_layer, n_head] scores of one kind ("Q", "K" or "V"; any case)."""
        return {"Q": self.q, "K": self.k, "V": self.v}[_kind(kind)]

    def top(self, kind: Literal["Q", "K", "V"], n: int = 10) -> list[dict]:
        """The n highest pairs of a kind (the receiver always in a later layer), highest first,
        ties in (sender, receiver) order: dicts {"sender": {"layer", "head"}, "receiver": {"layer",
        "head"}, "score"}, as the JSON's "top" lists them (0-based indices)."""
        return [{"sender": {"layer": sl, "head": sh}, "receiver": {"layer": rl, "head": rh}, "score": score}
                for sl, sh, rl, rh, score in self._core.top(_kind(kind), _count(n, "n"))]

    def grid(self, kind: Literal["Q", "K", "V"]) -> np.ndarray:
        """The scores of one kind as a square [n_layer * n_head, n_layer * n_head] matrix (a view, no
        copy): row l1 * n_head + h1 is the sender, column l2 * n_head + h2 the receiver, layer-major,
        so that each layer is an n_head-wide block and only blocks right of the diagonal are non-zero.
        Ready for matplotlib's imshow."""
        c = self.model.config
        n = c.n_layer * c.n_head
        return self.scores(kind).reshape(n, n)

    @functools.cached_property
    def raw(self) -> dict:
        """The document `headscope composition --json` writes (schema "headscope.composition/1", the
        CLI's default of 10 top pairs per kind), as a dict: computed on first use (a few MB for
        SmolLM2's 72,900 pairs of heads)."""
        return _json.loads(self._core.json(10))

    def to_frame(self) -> pandas.DataFrame:
        """One row per pair of heads whose receiver is in a later layer: sender_layer, sender_head,
        receiver_layer, receiver_head, q, k, v (the columns of `headscope composition --csv`), in
        (sender, receiver) order."""
        pd = _pandas("Composition.to_frame() needs")
        c = self.model.config
        L, H = c.n_layer, c.n_head
        l1, h1, l2, h2 = np.meshgrid(np.arange(L), np.arange(H), np.arange(L), np.arange(H), indexing="ij")
        later = l2 > l1
        return pd.DataFrame({"sender_layer": l1[later], "sender_head": h1[later], "receiver_layer": l2[later],
                             "receiver_head": h2[later], "q": self.q[later], "k": self.k[later], "v": self.v[later]})


def _kind(kind: Any) -> str:
    if not isinstance(kind, str) or kind.upper() not in _KINDS:
        raise Error(f"kind {kind!r} is not a kind of composition: give \"Q\", \"K\" or \"V\"")
    return kind.upper()


# ---- results ----


@dataclass(frozen=True)
class HeadStats:
    """One head's attention statistics on one text (definitions: docs/metrics.md).

    Means over the queries: entropy in bits and normalised to [0, 1], sparsity, keys covering
    90 % of a row, row maxima, where attention lands by offset and by token kind. NaN where a
    statistic has no sample (next_mass of a decoder, duplicate_mass without repeated tokens).
    """

    layer: int
    head: int
    kv_head: int
    n_queries: int
    entropy_bits: float
    entropy_norm: float
    sparsity: float
    keys_90: float
    keys_90_share: float
    max_attention: float
    avg_attention: float
    uniform_overlap: float
    mean_distance: float
    mean_offset: float
    self_mass: float
    prev_mass: float
    next_mass: float
    local_mass: float
    first_mass: float
    special_mass: float
    end_special_mass: float
    sink_mass: float
    sink_mass_norm: float
    punct_mass: float
    content_mass: float
    duplicate_mass: float
    n_duplicate_queries: int
    n_sink_queries: int  # queries whose sliding window holds the first position (all without one)
    offset_mass: dict[int, float]  # signed offset d = k - q in -8..8 -> mean weight at q + d
    # Statistics of the core's catalogue that this record has no field for (none while the package
    # and its extension agree; tests/python/test_catalogue.py checks that they do), kept by key.
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class HeadRole:
    """One head's roles: the primary one (id, name, detail such as "+2", score in [0, 1] and the
    evidence in words), the runner-up, and every role that could be scored (best first)."""

    layer: int
    head: int
    primary: str  # role id, e.g. "previous_token"
    name: str  # its display name
    detail: str
    label: str  # name and detail as every frontend shows them: "Fixed offset +2"
    score: float
    evidence: str
    secondary: str
    secondary_score: float
    confidence: float
    margin: float
    scores: dict[str, float]


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def kernel_isa() -> str:
    """The instruction-set path the core's hand-written kernels take in this process: "avx512",
    "avx2" or "portable", the best this CPU runs unless the environment variable HEADSCOPE_ISA
    lowers it (read once, on first use; `headscope --version` prints the same). The rest of the
    package is compiled for any x86-64-v2 CPU, so the same wheel runs on every one of them."""
    return _core.kernel_isa()


def statistics_catalogue() -> list[dict]:
    """The core's catalogue of per-head statistics, one dict per HeadStats field in the order of
    docs/schema.md: key, kind ("mean", "count" or "offsets"), label, unit, help (one or two
    sentences) and constants (the formula's constants by name, e.g. {"cover_mass": 0.9}); the same
    list GET /api/model serves as statistics_catalogue."""
    return _json.loads(_core.statistics_catalogue())


_STAT_FIELDS = {f.name for f in dataclasses.fields(HeadStats)}


@functools.cache
def _stat_kinds() -> dict[str, str]:
    return {c["key"]: c["kind"] for c in statistics_catalogue()}


def _stat_value(kind: str, v: Any) -> Any:
    if kind == "count":
        return int(v)
    if kind == "offsets":
        return {int(k): _num(x) for k, x in v.items()}
    return _num(v)


class Result:
    """One analysed text. Arrays are None unless captured (Model.run's `capture`):

    attention      float32 [n_layer, n_head, T, T]   row q: query q's weights over the keys
    head_outputs   float32 [n_layer, n_head, T, d_head]   attention . V per head
    contributions  float32 [n_layer, n_head, T, d_model]  each head's output through its W_O slice
    hidden_states  float32 [n_layer + 1, T, d_model]  embeddings, then each layer's output
    queries        float32 [n_layer, n_head, T, d_head]
    keys           float32 [n_layer, n_kv_head, T, d_head]
    value_norms    float32 [n_layer, n_head, T]  |v_k W_O,h| of each key (always kept)

    All of them are read-only views of the C++ capture (no copy); the capture lives as long as
    the Result or any of its arrays. A streamed run (maps="stream", or "auto" on a long text)
    keeps no attention: use tile().
    """

    def __init__(self, model: Model, core: _core.Run, words: bool) -> None:
        self.model = model
        self._core = core
        self.words = words
        enc = _encoding(core.encoding)
        self.encoding = enc
        self.ids: list[int] = enc.ids
        self.tokens: list[str] = enc.tokens  # vocabulary entries
        self.offsets: list[tuple[int, int]] = enc.offsets  # byte spans in the UTF-8 text
        self.special: list[bool] = enc.special
        self.text: str = _text(core.text)
        self.truncated: bool = core.truncated
        self.streamed: bool = core.streamed
        self._doc: dict | None = None

    def __repr__(self) -> str:
        c = self.model.config
        return f"<headscope.Result {len(self.ids)} tokens, {c.n_layer} x {c.n_head} heads{', streamed' if self.streamed else ''}>"

    @property
    def attention(self) -> np.ndarray | None:
        """float32 [n_layer, n_head, T, T] (read-only, zero-copy), or None for a streamed run."""
        return self._core.attention

    @property
    def head_outputs(self) -> np.ndarray | None:
        """float32 [n_layer, n_head, T, d_head] (read-only, zero-copy), when captured."""
        return self._core.head_outputs

    @property
    def contributions(self) -> np.ndarray | None:
        """float32 [n_layer, n_head, T, d_model] (read-only, zero-copy), when captured."""
        return self._core.contributions

    @property
    def hidden_states(self) -> np.ndarray | None:
        """float32 [n_layer + 1, T, d_model] (read-only, zero-copy), when captured."""
        return self._core.hidden_states

    @property
    def queries(self) -> np.ndarray | None:
        """float32 [n_layer, n_head, T, d_head] (read-only, zero-copy), when captured."""
        return self._core.queries

    @property
    def keys(self) -> np.ndarray | None:
        """float32 [n_layer, n_kv_head, T, d_head] (read-only, zero-copy), when captured."""
        return self._core.keys

    @property
    def value_norms(self) -> np.ndarray | None:
        """float32 [n_layer, n_head, T]: |v_k W_O,h|, what head h moves from key k (zero-copy)."""
        return self._core.value_norms

    def tile(self, layer: int, head: int, q0: int, q1: int, k0: int, k1: int, view: str = "weights") -> np.ndarray:
        """Exact attention of one head over query rows q0..q1-1 and keys k0..k1-1:
        float32 [q1 - q0, k1 - k0]. From the stored maps, or computed again from the run's
        queries and keys when it was streamed (equal to the dense map to float rounding).
        view="norm": the norm-weighted shares of the same cells instead, a_qk |v_k W_O,h| with
        each query's whole row (every key, not only the tile's) rescaled to sum 1, the values of
        norm_weighted_attention(), on a streamed run too."""
        return self._core.tile(layer, head, q0, q1, k0, k1, view)

    def json(self) -> str:
        """The run as the explorer's /api/run returns it (schema "headscope.run/2", docs/schema.md)."""
        return self._core.json()

    def _heads(self) -> list[dict]:
        if self._doc is None:
            self._doc = _json.loads(self.json())
        return self._doc["heads"]

    def stats(self) -> list[HeadStats]:
        """Every head's statistics, layer-major (token level, or word level with words=True)."""
        return _stats_of(self._heads())

    def roles(self) -> list[HeadRole]:
        """Every head's roles, layer-major."""
        return _roles_of(self._heads())

    def stats_frame(self) -> pandas.DataFrame:
        """stats() as a pandas DataFrame indexed by (layer, head); offset_mass as columns offset_-8 .. offset_+8."""
        pd = _pandas()
        rows = []
        for s in self.stats():
            row = dataclasses.asdict(s)
            row.update(row.pop("extra"))
            for d, v in row.pop("offset_mass").items():
                row[f"offset_{d:+d}"] = v
            rows.append(row)
        return pd.DataFrame(rows).set_index(["layer", "head"])

    def roles_frame(self) -> pandas.DataFrame:
        """roles() as a pandas DataFrame indexed by (layer, head), without the per-role scores."""
        pd = _pandas()
        rows = [{k: v for k, v in dataclasses.asdict(r).items() if k != "scores"} for r in self.roles()]
        return pd.DataFrame(rows).set_index(["layer", "head"])

    def show(self, view: str = "layer", **kw: Any) -> Any:
        """Show the run inline in a notebook (headscope.views; docs/python.md)."""
        from . import views

        return views.show(self, view=view, **kw)

    def save_html(self, path: str | os.PathLike, **kw: Any) -> Any:
        """Write the run's views as one self-contained HTML file (headscope.views)."""
        from . import views

        return views.save_html(self, path, **kw)


def _stats_of(heads: list[dict]) -> list[HeadStats]:
    """HeadStats records read through the catalogue: each key converted by its kind; a key with no
    field of its own is kept in `extra`, never dropped."""
    kinds = _stat_kinds()
    out = []
    for h in heads:
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, v in h["stats"].items():
            value = _stat_value(kinds.get(key, "mean"), v)
            (values if key in _STAT_FIELDS and key != "extra" else extra)[key] = value
        out.append(HeadStats(layer=h["layer"], head=h["head"], kv_head=h["kv_head"], extra=extra, **values))
    return out


def _roles_of(heads: list[dict]) -> list[HeadRole]:
    out = []
    for h in heads:
        r = h["roles"]
        p, s = r["primary"], r["secondary"]
        out.append(
            HeadRole(
                layer=h["layer"],
                head=h["head"],
                primary=p["id"],
                name=p["name"],
                detail=p["detail"],
                label=p["label"],
                score=_num(p["score"]),
                evidence=p["evidence"],
                secondary=s["id"],
                secondary_score=_num(s["score"]),
                confidence=_num(r["confidence"]),
                margin=_num(r["margin"]),
                scores={x["id"]: _num(x["score"]) for x in r["scores"]},
            )
        )
    return out


def _pandas(needs: str = "stats_frame() and roles_frame() need"):
    try:
        import pandas
    except ImportError as e:
        raise ImportError(f"{needs} pandas: pip install pandas") from e
    return pandas


def analyse_attention(
    attention: np.ndarray,
    tokens: Sequence[str],
    special: Sequence[bool] | None = None,
    *,
    causal: bool | None = None,
    words: bool = False,
) -> str:
    """Statistics and roles of attention maps from elsewhere ("bring your own attention").

    attention: float32 [n_layer, n_head, T, T], C-contiguous, each row a distribution over the keys.
    tokens: T labels; special: T flags for template tokens ([CLS], <s>), default none.
    causal: None infers it (every weight above the diagonal is zero).
    Returns JSON shaped like the heads part of /api/run (schema "headscope.maps/1"); what needs a
    model is absent: no probe (no induction / duplicate-token roles), no corpus evidence, no
    value norms (sink_mass_norm is null). Raises Error for a wrong dtype, shape or row.
    """
    return _core.analyse_attention(attention, list(tokens), None if special is None else list(special), causal, words)


_VIEWS = ("show", "show_attention", "save_html")


def __getattr__(name: str) -> Any:
    """headscope.show / show_attention / save_html, imported from headscope.views on first use
    (so that `import headscope` stays light)."""
    if name in _VIEWS:
        try:
            from . import views
        except ImportError as e:
            raise AttributeError(f"headscope.{name} needs headscope.views, which is not installed ({e})") from e
        return getattr(views, name)
    raise AttributeError(f"module 'headscope' has no attribute {name!r}")
