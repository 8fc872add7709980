"""Corpus jobs: many texts through packed forward passes, statistics as mergeable partials.

``Model.corpus(texts)`` returns a :class:`CorpusResult`: one record per text × head (a DataFrame),
the corpus's :class:`CorpusStats` and the texts that could not be analysed. A ``CorpusStats`` is a
partial result: serialise it with ``to_bytes()``, merge partials of the same model with
``merge()``; any split of a corpus merged in any order equals one pass bit for bit (docs/corpus.md).
``headscope.distributed`` runs the same job on a Ray cluster.
"""

from __future__ import annotations

import io
import json as _json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _core

if TYPE_CHECKING:  # pragma: no cover
    import pandas


class CorpusStats:
    """Every head's statistics over a corpus, as a partial result that merges exactly."""

    def __init__(self, core: _core.CorpusStats) -> None:
        self._core = core

    @classmethod
    def from_bytes(cls, data: bytes) -> CorpusStats:
        """A partial written by :meth:`to_bytes` (or ``headscope run --corpus --partial``)."""
        return cls(_core.CorpusStats.from_bytes(bytes(data)))

    def to_bytes(self) -> bytes:
        """The partial as CBOR bytes: a few numbers per head and statistic, no attention map."""
        return self._core.to_bytes()

    def merge(self, other: CorpusStats) -> CorpusStats:
        """Adds ``other`` (a partial of the same model) into this one; returns self."""
        self._core.merge(other._core)
        return self

    @property
    def texts(self) -> int:
        return self._core.texts

    @property
    def tokens(self) -> int:
        return self._core.tokens

    @property
    def model(self) -> str:
        return self._core.model

    def json(self) -> dict[str, Any]:
        """The document ``headscope merge --stats`` writes ("headscope.corpus_stats/1")."""
        return _json.loads(self._core.json())

    def to_frame(self) -> pandas.DataFrame:
        """One row per head: layer, head, kv_head, every pooled statistic, top_role and its share."""
        import pandas as pd

        rows = []
        for h in self.json()["heads"]:
            row = {"layer": h["layer"], "head": h["head"], "kv_head": h["kv_head"]}
            row.update({k: v for k, v in h["stats"].items() if not isinstance(v, list)})
            counts = h["role_counts"]
            row["top_role"] = h["top_role"]
            row["top_role_share"] = counts.get(h["top_role"], 0) / self.texts if self.texts else float("nan")
            rows.append(row)
        return pd.DataFrame(rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CorpusStats) and self._core.equals(other._core)

    def __repr__(self) -> str:
        return f"CorpusStats({self.model!r}, texts={self.texts}, tokens={self.tokens})"


@dataclass
class CorpusResult:
    """What :meth:`headscope.Model.corpus` returns."""

    records: pandas.DataFrame | None  # one row per text × head (None with records=False)
    stats: CorpusStats
    failures: list[dict[str, Any]] = field(default_factory=list)  # {"text", "id", "error"}
    texts: int = 0
    tokens: int = 0
    seconds: float = 0.0
    texts_per_second: float = 0.0


def _tqdm_bar(total: int) -> Callable[[int, int, int], None] | None:
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is an optional extra
        return None
    bar = tqdm(total=total, desc="corpus", unit="text", leave=False)

    def update(done: int, _total: int, failed: int) -> None:
        bar.update(done - bar.n)
        bar.set_postfix(failed=failed)
        if done >= _total:
            bar.close()

    return update


def records_frame(csv: str) -> pandas.DataFrame:
    """The core's CSV records (pipeline.h corpus_csv_rows) as a DataFrame, ids kept as strings."""
    import pandas as pd

    return pd.read_csv(io.StringIO(csv), dtype={"id": str, "links": str, "role": str, "secondary": str},
                       keep_default_na=False, na_values=[""])


def run_corpus(
    core_model: Any,
    texts: Iterable[str | bytes],
    ids: Iterable[Any] | None,
    *,
    records: bool,
    words: bool,
    batch_tokens: int,
    truncate: bool,
    probe: bool,
    corpus: bool,
    progress: bool | Callable[[int, int, int], None] | None,
) -> CorpusResult:
    items = [t.encode("utf-8", "surrogatepass") if isinstance(t, str) else bytes(t) for t in texts]
    id_list = [] if ids is None else [str(i) for i in ids]
    callback = _tqdm_bar(len(items)) if progress is True else (progress or None)
    csv, stats, summary = core_model.corpus(items, id_list, records, words, int(batch_tokens), truncate, probe,
                                            corpus, callback)
    s = _json.loads(summary)
    return CorpusResult(
        records=records_frame(csv) if csv is not None else None,
        stats=CorpusStats(stats),
        failures=s["failures"],
        texts=s["texts"],
        tokens=s["tokens"],
        seconds=s["seconds"],
        texts_per_second=s["texts_per_second"],
    )
