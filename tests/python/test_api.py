"""The package's API: config, tokenizer, records and DataFrames, generation, bring-your-own
attention, and documentation that states the shapes."""
import dataclasses
import json
import pydoc

import numpy as np
import pytest

from conftest import TEXT


def test_config_is_frozen_dataclass(minilm):
    c = minilm.config
    assert (c.family, c.n_layer, c.n_head, c.n_kv_head, c.d_model, c.d_head, c.vocab, c.max_positions, c.causal) == (
        "bert", 6, 12, 12, 384, 32, 30522, 512, False)
    assert c.window == (0,) * 6  # an encoder: no layer has a sliding window
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.n_layer = 3


def test_config_is_the_core_description(headscope, minilm):
    c, d = minilm.config, minilm.description
    # The same keys as GET /api/model; family and vocab are the aliases of the earlier names.
    assert (c.architecture, c.vocab_size) == (c.family, c.vocab) == ("bert", 30522)
    assert c.kv_head_of == tuple(range(12)) and c.w_o_shape == (384, 384)
    for f in dataclasses.fields(c):
        if f.name not in ("norm_eps", "eos_token_id"):
            want = getattr(c, f.name)
            assert (tuple(d[f.name]) if isinstance(want, tuple) else d[f.name]) == want, f.name
    assert d["statistics_catalogue"] == headscope.statistics_catalogue()
    assert d["statistics"]["min_role_score"] == 0.25 and d["roles"] and d["role_families"]
    assert "limits" not in d and "corpus_evidence" not in d  # the server's, not the model's


def test_tokenizer(minilm):
    enc = minilm.tokenizer.encode(TEXT)
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]" and enc.special[0] and not enc.special[1]
    assert enc.ids[:2] == [101, 1996]  # [CLS] the
    begin, end = enc.offsets[1]
    assert TEXT.encode()[begin:end] == b"The"
    assert minilm.tokenizer.decode(enc.ids[1:-1]).lower().startswith("the animal didn")
    assert len(minilm.tokenizer.encode(TEXT, special_tokens=False)) == len(enc) - 2


def test_stats_and_roles_records(minilm):
    result = minilm.run(TEXT)
    stats, roles = result.stats(), result.roles()
    assert len(stats) == len(roles) == 72 and (stats[13].layer, stats[13].head) == (1, 1)
    doc = json.loads(result.json())
    s = doc["heads"][13]["stats"]
    assert stats[13].entropy_bits == s["entropy_bits"] and stats[13].offset_mass[-1] == s["offset_mass"]["-1"]
    # Independent check from the array itself: mean over queries of the row maximum.
    a = result.attention[1, 1].astype(np.float64)
    assert stats[13].max_attention == pytest.approx(a.max(axis=1).mean(), abs=1e-6)
    assert stats[13].prev_mass == pytest.approx(np.mean([a[q, q - 1] for q in range(1, a.shape[0])]), abs=1e-6)
    assert roles[13].primary == doc["heads"][13]["roles"]["primary"]["id"] and roles[13].evidence
    text = "Headscope tokenizes unbelievably long words."  # WordPiece splits these into pieces
    tokens, words = minilm.run(text), minilm.run(text, words=True)
    doc = json.loads(words.json())
    assert doc["level"] == "word" and doc["n_units"] == 8 < doc["n_tokens"]  # 6 words + [CLS] + [SEP]
    assert words.stats()[0].n_queries == 8 and tokens.stats()[0].n_queries == doc["n_tokens"]


def test_frames(minilm):
    pytest.importorskip("pandas")
    result = minilm.run(TEXT)
    sf, rf = result.stats_frame(), result.roles_frame()
    assert sf.shape[0] == rf.shape[0] == 72 and sf.index.names == ["layer", "head"]
    assert sf.loc[(1, 1), "entropy_bits"] == result.stats()[13].entropy_bits
    assert "offset_-1" in sf.columns and rf.loc[(1, 1), "primary"] == result.roles()[13].primary


def test_help_mentions_shapes(headscope):
    text = pydoc.render_doc(headscope.Result, renderer=pydoc.plaintext)
    for shape in ["[n_layer, n_head, T, T]", "[n_layer, n_head, T, d_head]", "[n_layer, n_head, T, d_model]",
                  "[n_layer + 1, T, d_model]", "[n_layer, n_kv_head, T, d_head]"]:
        assert shape in text, shape
    assert "[layer, head, q, k]" in pydoc.render_doc(headscope.Model.run, renderer=pydoc.plaintext)
    assert "float32 [n_layer, n_head, T, T]" in pydoc.render_doc(headscope.analyse_attention, renderer=pydoc.plaintext)


def test_typing_files_shipped(headscope):
    import pathlib

    root = pathlib.Path(headscope.__file__).parent
    assert (root / "py.typed").exists()
    stub = (root / "_core.pyi").read_text()
    assert "def analyse_attention(" in stub and "class Model" in stub


def test_generate_matches_run(smollm2):
    seen = []
    g = smollm2.generate("The capital of France is", 5, capture_attention=True, stop_at_eos=False, progress=True,
                         on_token=lambda *t: seen.append(t))
    assert len(g.generated) == len(seen) == 5 and g.ids[: g.prompt_tokens] == smollm2.tokenizer.encode(
        "The capital of France is").ids
    assert g.continuation and g.attention.shape == (30, 9, len(g.ids), len(g.ids))
    # Row t of the generation's maps is what a whole run of the same ids computes.
    full = smollm2.run(g.ids, probe=False)
    np.testing.assert_allclose(g.attention, full.attention, atol=1e-5)


def test_analyse_attention_hand_built(headscope):
    T, tokens = 6, ["[CLS]", "a", "b", "c", "d", "[SEP]"]
    prev = np.zeros((1, 2, T, T), dtype=np.float32)
    prev[0, 0, 0, 0] = 1
    for q in range(1, T):
        prev[0, 0, q, q - 1] = 1  # head 0: previous token
    prev[0, 1] = np.eye(T)  # head 1: self
    doc = json.loads(headscope.analyse_attention(prev, tokens, [True, False, False, False, False, True]))
    assert doc["schema"] == "headscope.maps/1" and doc["n_tokens"] == T and len(doc["heads"]) == 2
    h0, h1 = doc["heads"]
    assert h0["stats"]["prev_mass"] == 1.0 and h0["roles"]["primary"]["id"] == "previous_token"
    assert h1["stats"]["self_mass"] == 1.0 and h1["roles"]["primary"]["id"] == "self"
    assert h0["stats"]["sink_mass_norm"] is None  # no value norms without a model
    assert doc["model"]["causal"] is True  # head 0 and 1 have nothing above the diagonal


def test_analyse_attention_of_a_run_equals_the_run(minilm, headscope):
    result = minilm.run(TEXT, probe=False, corpus=False)
    doc = json.loads(headscope.analyse_attention(result.attention, result.tokens, result.special))
    assert doc["model"]["causal"] is False
    for mine, run in zip(doc["heads"], json.loads(result.json())["heads"]):
        for key in ["entropy_bits", "max_attention", "prev_mass", "sink_mass", "mean_distance"]:
            assert mine["stats"][key] == pytest.approx(run["stats"][key], abs=1e-9), key


def test_atlas_small(minilm):
    import os
    import pathlib

    data = pathlib.Path(os.environ.get("HEADSCOPE_DATA", pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"))
    if not (data / "ud" / "en_pud-ud-test.conllu").exists():
        pytest.skip(f"no gold data in {data}")
    seen = []
    atlas = minilm.atlas(data, max_sentences=5, max_gap_rows=5, importance_texts=0,
                         progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert atlas["json"]["schema"] == "headscope.atlas/2" and atlas["png"][:4] == b"\x89PNG"
    assert seen and all(0 < done <= total for _, done, total in seen)


def test_ablation_and_importance_are_the_core_results(minilm):
    """Model.ablate and Model.importance return the pipeline's JSON: the shapes of
    `headscope ablate` and POST /api/importance, with ranks and Spearman from the core."""
    r = minilm.ablate(TEXT, [(3, 1), (0, 5)])
    assert r["heads"] == [{"layer": 3, "head": 1}, {"layer": 0, "head": 5}]
    (effect,) = r["texts"]
    assert r["effect"] == effect["embedding_distance"] > 0 and len(effect["layer_change"]) == 6
    assert minilm.ablate([TEXT], [])["effect"] == 0.0  # nothing ablated: the plain run
    imp = minilm.importance(TEXT)
    heads = imp["importance"]
    assert imp["shape"] == [6, 12] and imp["unit"] == "1 - cos" and len(heads) == 72
    assert [(h["layer"], h["head"]) for h in heads] == [(l, h) for l in range(6) for h in range(12)]
    # rank 1 = the largest effect (ties keep layer-major order), checked against a sort done here
    order = sorted(range(72), key=lambda i: (-heads[i]["ablation"], i))
    assert [heads[i]["rank"] for i in order] == list(range(1, 73))
    one = minilm.ablate(TEXT, [(heads[order[0]]["layer"], heads[order[0]]["head"])])
    assert one["effect"] == heads[order[0]]["ablation"]
    # Spearman's rho from the ranks (no ties among real effects), computed here
    def ranks(v):
        r = np.empty(len(v))
        r[np.argsort(v, kind="stable")] = np.arange(1, len(v) + 1)
        return r
    ra, rp = ranks([h["ablation"] for h in heads]), ranks([h["proxy"] for h in heads])
    assert imp["spearman"] == pytest.approx(np.corrcoef(ra, rp)[0, 1], abs=1e-12)
