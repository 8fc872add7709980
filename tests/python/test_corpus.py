"""Model.corpus (docs/corpus.md): records against single runs of the same texts through the CLI
(`headscope run --json`, one process per text: an independent path), the summary and failures,
the progress callback, and CorpusStats partials (bytes round trip, exact merge, bad input)."""
import json
import math
import subprocess

import pytest

from conftest import MINILM

TEXTS = [
    "The trophy did not fit in the suitcase because it was too big.",
    "Hi.",
    "When the committee finally met, nobody could remember who had proposed the plan.",
    "   ",
    "Cats sleep all day.",
]


def test_records_equal_single_runs_of_the_cli(minilm, cli, tmp_path):
    result = minilm.corpus(TEXTS, ids=["a", "b", "c", "d", "e"], probe=False, corpus=False)
    assert result.texts == 5 and [f["id"] for f in result.failures] == ["d"]
    assert result.stats.texts == 4 and result.tokens == result.stats.tokens
    n_heads = 6 * 12
    assert len(result.records) == 4 * n_heads
    for index in (0, 1, 2, 4):
        out = tmp_path / f"{index}.json"
        subprocess.run([cli, "run", "-m", MINILM, "--text", TEXTS[index], "--json", out, "--no-probe", "--no-corpus",
                        "--quiet"], check=True)
        heads = json.loads(out.read_text())["heads"]
        rows = result.records[result.records["text"] == index].reset_index(drop=True)
        assert (rows["id"] == "abcde"[index]).all()
        for h, row in zip(heads, rows.itertuples()):
            assert (row.layer, row.head) == (h["layer"], h["head"])
            for key in ("entropy_bits", "max_attention", "sink_mass", "prev_mass", "keys_90"):
                want = h["stats"][key]
                got = getattr(row, key)
                assert (want is None and math.isnan(got)) or abs(got - want) <= 2e-5 * max(1, abs(want)), key


def test_progress_partials_and_refusals(headscope, minilm):
    calls = []
    a = minilm.corpus(TEXTS[:2], records=False, probe=False, corpus=False, progress=lambda *p: calls.append(p))
    assert a.records is None and calls and calls[-1] == (2, 2, 0)
    b = minilm.corpus(TEXTS[2:], records=False, probe=False, corpus=False, batch_tokens=8)
    whole = minilm.corpus(TEXTS, records=False, probe=False, corpus=False).stats
    merged = headscope.CorpusStats.from_bytes(b.stats.to_bytes()).merge(a.stats)
    assert merged == whole and merged.texts == 4
    frame = whole.to_frame()
    assert len(frame) == 72 and frame["top_role_share"].between(0, 1).all()
    assert set(frame["top_role"]) <= {r["id"] for r in minilm.description["roles"]}
    with pytest.raises(headscope.Error, match="corpus_partial"):
        headscope.CorpusStats.from_bytes(b"not a partial")
    with pytest.raises(headscope.Error, match="ids for"):
        minilm.corpus(TEXTS, ids=["only one"])
