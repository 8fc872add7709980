"""headscope.distributed: corpus jobs on a Ray cluster (``pip install headscope[ray]``).

Four jobs: :func:`corpus` (every head's statistics, roles and records over a corpus),
:func:`atlas` (the corpus atlas: roles validated on the gold treebanks and GAP),
:func:`importance` (every head zero-ablated alone over a set of texts, ranked) and :func:`patch`
(an activation-patching sweep over a dataset of prompt pairs).

The job is the one ``Model.corpus`` runs on one machine, split by Ray Data: the texts become a
dataset, ``map_batches`` hands batches of them to a pool of actors that each load the model once
(the C++ core runs with the GIL released, many texts per forward pass), every actor returns the
partial statistics of its batch (a few kilobytes; no attention map leaves a worker) and, when asked,
writes its batch's records as a Parquet file; the driver merges the partials. Partials merge
exactly, so the result is bit for bit that of one process over the same texts, whatever the
cluster, the batching or the order the batches finish in — and a batch retried after a worker died
counts once.

Runs on a local Ray instance by default; ``address=`` joins an existing cluster ("auto", or
"ray://host:10001"). docs/corpus.md says how to start one and how much memory an actor needs.
"""

from __future__ import annotations

import dataclasses
import json as _json
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .corpus import CorpusStats

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import ray.data


@dataclass
class DistributedResult:
    """What :func:`corpus` returns."""

    stats: CorpusStats
    failures: list[dict[str, Any]] = field(default_factory=list)  # {"text", "id", "error"}, by corpus index
    records_dir: str | None = None  # the Parquet files (one per batch), when records were asked for
    batches: int = 0
    seconds: float = 0.0

    def records(self) -> pandas.DataFrame:
        """Every record (text × head) read back from the Parquet files, in corpus order."""
        import pandas as pd

        if self.records_dir is None:
            raise ValueError("the job wrote no records (pass records_dir=)")
        frame = pd.read_parquet(self.records_dir)
        return frame.sort_values(["text", "layer", "head"], kind="stable").reset_index(drop=True)


class _CorpusWorker:
    """One actor: the model loaded once, then batch after batch of texts."""

    def __init__(self, model_path: str, threads: int, options: dict[str, Any], records_dir: str | None) -> None:
        self.model = _load(model_path, threads)
        self.options = options
        self.records_dir = records_dir

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        indices = [int(i) for i in batch["index"]]
        ids = [str(i) for i in batch["id"]]
        result = self.model.corpus(
            [str(t) for t in batch["text"]], ids=ids, records=self.records_dir is not None, **self.options
        )
        failures = [dict(f, text=indices[f["text"]]) for f in result.failures]
        if self.records_dir is not None and result.records is not None:
            frame = result.records
            frame["text"] = [indices[i] for i in frame["text"]]
            os.makedirs(self.records_dir, exist_ok=True)
            # Named by the batch's first text: a batch retried after a failure writes the same file again.
            frame.to_parquet(os.path.join(self.records_dir, f"part-{indices[0]:012d}.parquet"), index=False)
        return {
            "first": [indices[0]],
            "partial": [result.stats.to_bytes()],
            "failures": [_json.dumps(failures)],
        }


class _ImportanceWorker:
    """One actor: the model loaded once, then each batch's importance parts (per text and head)."""

    def __init__(self, model_path: str, threads: int) -> None:
        self.model = _load(model_path, threads)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        indices = [int(i) for i in batch["index"]]
        parts = self.model._core.importance_parts([str(t).encode("utf-8") for t in batch["text"]])
        return {
            "first": [indices[0]],
            "texts": [len(indices)],
            "n_layer": [parts["n_layer"]],
            "n_head": [parts["n_head"]],
            "causal": [parts["causal"]],
            "tokens": [_json.dumps(parts["tokens"])],
            "effect": [parts["effect"].tobytes()],
            "proxy": [parts["proxy"].tobytes()],
        }


def _load(model_path: str, threads: int) -> Any:
    import headscope

    try:
        return headscope.load(model_path, threads=threads)
    except Exception as e:  # noqa: BLE001 - re-raised with the node named
        raise RuntimeError(f"node {socket.gethostname()} cannot load the model {model_path!r}: {e}") from e


def _start(address: str | None) -> None:
    import ray

    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)


def _pool(workers: int | None, threads_per_worker: int) -> int:
    import ray

    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    return workers or max(1, cpus // max(1, threads_per_worker))


def importance(
    model_path: str | os.PathLike,
    texts: Iterable[str] | ray.data.Dataset,
    *,
    address: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    memory_per_worker: int | None = None,
    texts_per_batch: int = 8,
    out_dir: str | os.PathLike | None = None,
    progress: bool | Callable[[int, int], None] = True,
) -> dict[str, Any]:
    """Every head zero-ablated alone over the texts, on a Ray cluster: what ``Model.importance``
    returns for the same texts, bit for bit (ranks and Spearman's rho included; ``seconds`` is the
    job's wall time), plus ``"frame"``: a DataFrame with a row per head (layer, head, ablation,
    proxy, rank). ``out_dir``: that frame is also written there as ``importance.parquet``.

    Each actor returns, per text of its batch, every head's ablation effect and proxy term (a few KB
    per text; docs/causal.md); the driver puts them in corpus order and averages them as one process
    does (the core's ``importance_from_parts``). Texts are independent under zero ablation, so the
    split does not change any number; a batch retried after a worker died counts once.
    ``texts_per_batch``: texts per actor call (each runs n_layer · n_head ablations over them).
    """
    import numpy as np

    import headscope

    _start(address)
    start = _now()
    ds = _dataset(texts, None)
    total = ds.count()
    if total == 0:
        raise ValueError("no texts: importance needs at least one")
    parts = _map(ds, _ImportanceWorker, (os.fspath(model_path), threads_per_worker), texts_per_batch, workers,
                 threads_per_worker, memory_per_worker)
    batches = _gather(parts.iter_rows(), "first", "texts", progress, total, "importance (ray)")
    rows = [batches[k] for k in sorted(batches)]
    first = rows[0]
    n_layer, n_head, causal = int(first["n_layer"]), int(first["n_head"]), bool(first["causal"])
    tokens = [t for r in rows for t in _json.loads(r["tokens"])]
    effect = np.concatenate([np.frombuffer(r["effect"], dtype=np.float64) for r in rows]).reshape(len(tokens), -1)
    proxy = np.concatenate([np.frombuffer(r["proxy"], dtype=np.float64) for r in rows]).reshape(len(tokens), -1)
    result = _json.loads(headscope._core.importance_from_parts(n_layer, n_head, causal, effect, proxy, tokens))
    result["seconds"] = {"wall": _now() - start, "cpu": None}
    result["frame"] = _frame(result["importance"], out_dir, "importance.parquet")
    return result


def _frame(rows: list[dict[str, Any]] | pandas.DataFrame, out_dir: str | os.PathLike | None,
           name: str) -> pandas.DataFrame:
    """The rows as a DataFrame, also written as Parquet (pyarrow) in ``out_dir`` when given."""
    import pandas as pd

    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        frame.to_parquet(os.path.join(out_dir, name), index=False, engine="pyarrow")
    return frame


class _PatchWorker:
    """One actor: the model loaded once, then each batch of pairs' sweep in parts (per pair)."""

    def __init__(self, model_path: str, threads: int, request: dict[str, Any]) -> None:
        self.model = _load(model_path, threads)
        self.request = request

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        import headscope

        indices = [int(i) for i in batch["index"]]
        pairs = [_json.loads(p) for p in batch["pair"]]
        document = headscope._pairs_document(pairs, causal=self.model.config.causal)
        r = self.request
        parts, model = self.model._core.patch_parts(document, r["sites"], r["direction"], r["metric"], r["layers"])
        config = _json.dumps(dataclasses.asdict(self.model.config))
        return {"first": [indices[0]], "pairs": [len(pairs)], "parts": [parts], "model": [model], "config": [config]}


def patch(
    model_path: str | os.PathLike,
    pairs: Iterable[dict] | str | os.PathLike,
    *,
    sites: str | Iterable[str] = "head",
    direction: str | None = None,
    metric: str | None = None,
    layers: int | Iterable[int] | None = None,
    address: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    memory_per_worker: int | None = None,
    pairs_per_batch: int = 4,
    out_dir: str | os.PathLike | None = None,
    progress: bool | Callable[[int, int], None] = True,
) -> Any:
    """An activation-patching sweep (``Model.patch`` with ``sites``, ``direction``, ``metric`` and
    ``layers``) over a dataset of prompt pairs on a Ray cluster; returns the PatchResult that
    ``Model.patch(pairs=pairs, ...)`` returns, bit for bit (``seconds`` aside).

    ``pairs``: a PromptPairs (``headscope.ioi_pairs(model, 500)``), a list of dicts {"clean",
    "corrupt", "answer", "wrong"} or the path of a pairs file. Each actor runs the sweep on
    ``pairs_per_batch`` pairs and returns every pair's clean, corrupted and patched metrics (8 bytes
    per site and pair); the driver appends them in dataset order and averages them as one process
    does (the core's ``patch_report``). Pairs are independent, so the split changes no number; a
    batch retried after a worker died counts once. All pairs must have the same token count when a
    site is per position. ``out_dir``: the result's ``to_frame()`` (a row per site) is also
    written there as ``patch.parquet``.
    """
    import headscope

    if isinstance(pairs, (str, os.PathLike)):
        loaded = headscope.read_pairs(pairs)
    else:
        loaded = pairs
    items = list(loaded)
    if not items:
        raise ValueError("no prompt pairs: patching needs at least one")
    task, seed = getattr(loaded, "task", "custom"), int(getattr(loaded, "seed", 0))
    request = {"sites": headscope._sites(sites), "direction": direction or "", "metric": metric or "",
               "layers": headscope._layers(layers)}
    _start(address)
    start = _now()
    import ray.data

    ds = ray.data.from_items([{"index": i, "pair": _json.dumps(dict(p))} for i, p in enumerate(items)])
    parts = _map(ds, _PatchWorker, (os.fspath(model_path), threads_per_worker, request), pairs_per_batch, workers,
                 threads_per_worker, memory_per_worker)
    shards = _gather(parts.iter_rows(), "first", "pairs", progress, len(items), "patching (ray)")
    rows = [shards[k] for k in sorted(shards)]
    raw = headscope._core.patch_from_parts(rows[0]["model"], task, seed, [r["parts"] for r in rows], _now() - start)
    result = _json.loads(raw)
    fields = _json.loads(rows[0]["config"])
    config = headscope.Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()})
    shape = type("_Shape", (), {"config": config})()  # what PatchResult reads of a model
    patched = headscope.PatchResult(shape, result, headscope.PromptPairs(items, task=task, seed=seed))
    if out_dir is not None:
        _frame(patched.to_frame(), out_dir, "patch.parquet")
    return patched


class _AtlasWorker:
    """One actor: the model loaded once, then each batch of (stage, begin, end) items' partials."""

    def __init__(self, model_path: str, threads: int, data_dir: str, limits: tuple[int, int]) -> None:
        self.model = _load(model_path, threads)
        self.data_dir, self.limits = data_dir, limits

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {"item": [], "items": [], "partial": []}
        for item, stage, begin, end in zip(batch["item"], batch["stage"], batch["begin"], batch["end"]):
            part = self.model._core.atlas_partial(self.data_dir, *self.limits, str(stage), int(begin), int(end))
            out["item"].append(int(item))
            out["items"].append(int(end) - int(begin))
            out["partial"].append(part)
        return out


def _finish_atlas(model_path: str, threads: int, data_dir: str, limits: tuple[int, int], importance_texts: int,
                  partial: bytes) -> dict[str, Any]:
    """The atlas from the merged partial: the probe, importance and roles, on one worker."""
    model = _load(model_path, threads)
    d = model._core.atlas(data_dir, limits[0], limits[1], importance_texts, None, partial)
    return {"json": d["json"], "markdown": d["markdown"], "png": d["png"]}


def atlas(
    model_path: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    *,
    max_sentences: int = 0,
    max_gap_rows: int = 0,
    importance_texts: int = -1,
    address: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    memory_per_worker: int | None = None,
    items_per_batch: int = 25,
    out_dir: str | os.PathLike | None = None,
    progress: bool | Callable[[int, int], None] = True,
) -> dict[str, Any]:
    """The corpus atlas of a model (``Model.atlas``, docs/atlas.md) on a Ray cluster: the same dict
    ({"json", "markdown", "png", "seconds"}), the same atlas bit for bit (its timings aside), plus
    ``"frame"``: a DataFrame with a row per head (:func:`atlas_frame`). ``out_dir``: that frame
    is also written there as ``atlas_heads.parquet``.

    The treebank and GAP stages — the bulk of the work — are cut into items of ``items_per_batch``
    sentences or rows, each run by an actor that returns its partial: dependency and coreference
    counts (integers) and every head's statistic sums (exact fixed point), a few hundred KB and no
    attention map. The driver merges them (any order gives the same bytes) and one worker builds the
    atlas from the merge: the probe, the importance and the roles. ``data_dir`` must be readable at
    the same path on every node (default: $HEADSCOPE_DATA, else ../shared/data).
    """
    import ray

    import headscope

    if data_dir is None:
        data_dir = os.environ.get("HEADSCOPE_DATA") or "../shared/data"
    data, limits = os.fspath(data_dir), (int(max_sentences), int(max_gap_rows))
    _start(address)
    start = _now()
    sizes = headscope._core.atlas_sizes(data, *limits)
    items = []
    for stage, size in zip(("report", "select", "coref_report", "coref_select"), sizes):
        for begin in range(0, size, items_per_batch):
            items.append({"item": len(items), "stage": stage, "begin": begin,
                          "end": min(size, begin + items_per_batch)})
    total = sum(sizes)
    parts = _map(ray.data.from_items(items), _AtlasWorker, (os.fspath(model_path), threads_per_worker, data, limits),
                 1, workers, threads_per_worker, memory_per_worker)
    partials = {k: row["partial"] for k, row in _gather(parts.iter_rows(), "item", "items", progress, total,
                                                            "atlas (ray)").items()}
    merged = headscope._core.atlas_merge([partials[k] for k in sorted(partials)])
    finish = ray.remote(num_cpus=threads_per_worker, memory=memory_per_worker)(_finish_atlas)
    d = ray.get(finish.remote(os.fspath(model_path), threads_per_worker, data, limits, importance_texts, merged))
    atlas_json = _json.loads(d["json"])
    return {"json": atlas_json, "markdown": d["markdown"], "png": d["png"], "seconds": _now() - start,
            "frame": _frame(atlas_rows(atlas_json), out_dir, "atlas_heads.parquet")}


def atlas_rows(atlas_json: dict[str, Any]) -> list[dict[str, Any]]:
    """A row per head of an atlas's JSON: layer, head, kv_head, its role, secondary role,
    confidence and margin, and every scalar statistic at the token level (``stats.``) and the word
    level (``word_stats.``)."""
    rows = []
    for h in atlas_json["heads"]:
        roles = h.get("roles", {})
        row = {"layer": h["layer"], "head": h["head"], "kv_head": h.get("kv_head", h["head"]),
               "role": (roles.get("primary") or {}).get("id"),
               "secondary": (roles.get("secondary") or {}).get("id"),
               "confidence": roles.get("confidence"), "margin": roles.get("margin")}
        for level in ("stats", "word_stats"):
            for key, value in (h.get(level) or {}).items():
                if isinstance(value, (int, float)) or value is None:
                    row[f"{level}.{key}"] = value
        rows.append(row)
    return rows


def _map(ds: ray.data.Dataset, worker: type, args: tuple, batch_size: int, workers: int | None,
         threads_per_worker: int, memory_per_worker: int | None) -> ray.data.Dataset:
    """``map_batches`` of `worker` (constructed with `args` once per actor) on an actor pool. A worker
    that dies is restarted and its batch run again (Ray Data's default), hence _gather's dedup."""
    return ds.map_batches(
        worker,
        fn_constructor_args=args,
        batch_size=batch_size,
        batch_format="pandas",
        compute=_actor_pool(_pool(workers, threads_per_worker)),
        num_cpus=threads_per_worker,
        memory=memory_per_worker,
    )


def _gather(rows: Iterable[dict[str, Any]], key: str, count: str, progress: Any, total: int,
            desc: str) -> dict[int, dict[str, Any]]:
    """The rows by their `key` (a batch delivered twice, after a retry, counted once), with progress
    in the items each row's `count` says it holds."""
    bar = _bar(progress, total, desc)
    got: dict[int, dict[str, Any]] = {}
    done = 0
    for row in rows:
        k = int(row[key])
        if k in got:
            continue
        got[k] = row
        done += int(row[count])
        _advance(bar, progress, int(row[count]), done, total)
    if bar is not None:
        bar.close()
    return got


def _actor_pool(size: int) -> Any:
    import ray.data

    return ray.data.ActorPoolStrategy(size=size)


def _bar(progress: Any, total: int, desc: str) -> Any:
    if progress is not True:
        return None
    try:
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit="text", leave=False)
    except ImportError:  # pragma: no cover
        return None


def _advance(bar: Any, progress: Any, step: int, done: int, total: int) -> None:
    if bar is not None:
        bar.update(step)
    elif callable(progress):
        progress(done, total)


def _dataset(texts: Iterable[str] | ray.data.Dataset, ids: Sequence[Any] | None) -> ray.data.Dataset:
    import ray.data

    if isinstance(texts, ray.data.Dataset):
        return texts
    items = list(texts)
    if ids is not None and len(ids) != len(items):
        raise ValueError(f"{len(ids)} ids for {len(items)} texts; give one per text")
    return ray.data.from_items(
        [{"index": i, "id": str(ids[i]) if ids is not None else str(i), "text": t} for i, t in enumerate(items)]
    )


def corpus(
    model_path: str | os.PathLike,
    texts: Iterable[str] | ray.data.Dataset,
    *,
    ids: Sequence[Any] | None = None,
    address: str | None = None,
    workers: int | None = None,
    threads_per_worker: int = 1,
    memory_per_worker: int | None = None,
    texts_per_batch: int = 64,
    records_dir: str | os.PathLike | None = None,
    words: bool = False,
    batch_tokens: int = 2048,
    truncate: bool = False,
    probe: bool = True,
    evidence: bool = True,
    progress: bool | Callable[[int, int], None] = True,
) -> DistributedResult:
    """Every text analysed on a Ray cluster; the corpus's statistics merged on the driver.

    ``texts``: strings (their index in the list is their number in the records), or a Ray Dataset
    with columns index, id and text. ``workers``: actors (default: one per ``threads_per_worker``
    CPUs of the cluster); ``memory_per_worker``: bytes Ray reserves for each (docs/corpus.md
    gives what an actor holds). ``texts_per_batch``: texts handed to an actor at a time (each actor then
    packs them into forward passes of ``batch_tokens``). ``records_dir``: write one record per text ×
    head as Parquet files there (a directory every node can write: local for a one-machine cluster,
    shared storage for a real one). ``progress``: a tqdm bar (texts, texts/s, ETA), or a callable
    (texts done, texts in all) called as each batch's partial arrives. Raises the first worker error that is not a text's own (a model path a
    node cannot read, for instance), naming the node.
    """
    _start(address)
    start = _now()
    ds = _dataset(texts, ids)
    total = ds.count()
    options = {"words": words, "batch_tokens": batch_tokens, "truncate": truncate, "probe": probe, "corpus": evidence}
    out_dir = os.fspath(records_dir) if records_dir is not None else None
    partials = _map(ds, _CorpusWorker, (os.fspath(model_path), threads_per_worker, options, out_dir), texts_per_batch,
                    workers, threads_per_worker, memory_per_worker)
    return _merge(partials, out_dir, start, progress, total)


def _now() -> float:
    import time

    return time.monotonic()


def _merge(partials: ray.data.Dataset, out_dir: str | None, start: float, progress: Any,
           total: int) -> DistributedResult:
    """Partials merged as they arrive; progress in texts (a tqdm bar shows texts/s and the ETA)."""
    import time

    bar = _bar(progress, total, "corpus (ray)")
    done = 0
    stats: CorpusStats | None = None
    failures: list[dict[str, Any]] = []
    seen: set[int] = set()
    batches = 0
    for row in partials.iter_rows():
        first = int(row["first"])
        if first in seen:  # a retried batch delivered twice: counted once
            continue
        seen.add(first)
        part = CorpusStats.from_bytes(row["partial"])
        batch_failures = _json.loads(row["failures"])
        stats = part if stats is None else stats.merge(part)
        failures.extend(batch_failures)
        batches += 1
        done += part.texts + len(batch_failures)
        _advance(bar, progress, part.texts + len(batch_failures), done, total)
    if bar is not None:
        bar.close()
    if stats is None:
        raise ValueError("the corpus is empty: no text to analyse")
    failures.sort(key=lambda f: f["text"])
    return DistributedResult(stats=stats, failures=failures, records_dir=out_dir, batches=batches,
                             seconds=time.monotonic() - start)
