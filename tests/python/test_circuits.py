"""Activation patching, path patching, prompt pairs and the logit lens from Python (docs/python.md,
"Circuits"): the results equal `headscope patch --json` for the same request, the normalised
effects follow from the raw values, the maps have the documented shapes, and the lens's last row is
the model's own prediction."""
import json
import pathlib
import pydoc
import subprocess

import numpy as np
import pytest

from conftest import ROOT, SMOLLM2, THREADS

GEMMA3 = ROOT / "models" / "gemma-3-270m" / "gemma-3-270m-q4_k_m.gguf"

# An IOI-like pair: the clean prompt names Mary as the indirect object; the corruption swaps the
# subject, so the model should now answer " John".
IOI = {
    "clean": "When Mary and John went to the store, John gave a drink to",
    "corrupt": "When Mary and John went to the store, Mary gave a drink to",
    "answer": " Mary",
    "wrong": " John",
}
LAYERS = [20, 25, 29]  # a few late layers: fast, and where SmolLM2's IOI heads are


def normalised(value, clean, corrupt):
    return (value - corrupt) / (clean - corrupt)


# ---- encoders (MiniLM): cosine, residual and head sites ----


def test_patch_encoder_resid_and_heads(minilm, headscope):
    clean, corrupt = "The cat sat on the mat.", "The dog sat on the mat."
    r = minilm.patch(clean=clean, corrupt=corrupt, sites=["resid", "head"])
    assert (r.metric, r.direction, r.n_pairs) == ("cosine", "denoise", 1)  # an encoder's default metric
    assert r.clean == 0.0 and r.corrupt > 0  # 1 - cos against the clean embedding itself
    assert r.sites == ["resid", "head"] and r.raw["schema"] == "headscope.patch/1"
    T = r.n_tokens
    assert T == len(minilm.tokenizer.encode(clean)) == 9
    heads, resid = r.map("head"), r.map("resid")
    assert heads.shape == (6, 12) and resid.shape == (6, T) and not np.isnan(heads).any()
    assert r.map().shape == resid.shape  # the sweep's first site
    # Layer 0's residual stream differs only at the token that was changed ("cat" / "dog", after
    # [CLS] and "the"): patching it there restores the clean run entirely, anywhere else nothing.
    np.testing.assert_allclose(resid[0], [0, 0, 1, 0, 0, 0, 0, 0, 0], atol=1e-6)
    # Every normalised effect is (value - corrupt) / (clean - corrupt) of the raw values.
    raw = r.map("resid", normalised=False)
    np.testing.assert_allclose(resid, normalised(raw, r.clean, r.corrupt), rtol=1e-9, atol=1e-12)
    assert len(r.results) == 6 * T + 72 and r.results[0] == {
        "site": "resid", "layer": 0, "head": None, "position": 0, "value": raw[0, 0], "normalised": resid[0, 0]}
    with pytest.raises(headscope.Error, match="'q' was not patched in this sweep"):
        r.map("q")


def test_patch_encoder_sites_shapes(minilm):
    r = minilm.patch(pairs=[("The cat sat on the mat.", "The dog sat on the mat.")], sites="k,attn,mlp,head_position",
                     layers=[1, 4], direction="noise")
    assert r.direction == "noise" and r.sites == ["k", "attn", "mlp", "head_position"]
    assert r.map("k").shape == (6, 12) and r.map("attn").shape == r.map("mlp").shape == (6,)
    hp = r.map("head_position")
    assert hp.shape == (6, 12, 9)
    # Layers left out are NaN, the ones swept are not.
    assert np.isnan(hp[[0, 2, 3, 5]]).all() and not np.isnan(hp[[1, 4]]).any()
    assert np.isnan(r.map("attn")[0]) and not np.isnan(r.map("attn")[1])
    assert all(x["group"] == [x["head"]] for x in r.results if x["site"] == "k")  # no grouped-query attention


def test_patch_frame(minilm, headscope):
    pd = pytest.importorskip("pandas")
    r = minilm.patch(clean="The cat sat on the mat.", corrupt="The dog sat on the mat.", sites="resid,attn", layers=0)
    frame = r.to_frame()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == [
        "site", "layer", "head", "position", "value", "normalised"]
    assert len(frame) == 9 + 1 and frame["head"].isna().all() and frame["position"].isna().sum() == 1
    assert frame.loc[2, "normalised"] == r.map("resid")[0, 2]


# ---- decoders (SmolLM2): IOI, the CLI's results, path patching, heads together ----


def test_patch_decoder_equals_cli(smollm2, cli, tmp_path):
    r = smollm2.patch(**IOI, layers=LAYERS)
    assert (r.metric, r.direction, r.n_tokens) == ("logit_diff", "denoise", 14)
    assert r.clean > 0 > r.corrupt  # clean prefers " Mary", the corruption " John"
    out = tmp_path / "patch.json"
    args = [f"--{k}={v}" for k, v in IOI.items()]
    subprocess.run([str(cli), "patch", "--model", str(SMOLLM2), *args, "--layers", ",".join(map(str, LAYERS)),
                    "--threads", str(THREADS), "--json", str(out)], check=True, capture_output=True, timeout=300)
    want = json.loads(out.read_text())
    for key in ("schema", "task", "metric", "direction", "n_pairs", "n_tokens", "clean", "corrupt", "passes"):
        assert r.raw[key] == want[key], key
    assert [(x["site"], x["layer"], x["head"]) for x in r.results] == [
        (x["site"], x["layer"], x["head"]) for x in want["results"]]
    assert [x["value"] for x in r.results] == [x["value"] for x in want["results"]]  # the same computation
    assert [x["normalised"] for x in r.results] == [x["normalised"] for x in want["results"]]
    # And from the raw numbers: normalised = (value - corrupt) / (clean - corrupt).
    m, raw = r.map(), r.map(normalised=False)
    assert m.shape == (30, 9)
    swept = np.zeros(30, bool)
    swept[LAYERS] = True
    assert np.isnan(m[~swept]).all() and not np.isnan(m[swept]).any()
    np.testing.assert_allclose(m[swept], normalised(raw[swept], r.clean, r.corrupt), rtol=1e-12)


def test_patch_decoder_kv_heads(smollm2):
    r = smollm2.patch(**IOI, sites=["v"], layers=[29], metric="prob")
    assert r.metric == "prob" and 0 < r.corrupt < r.clean < 1
    assert r.map("v").shape == (30, 3)  # n_kv_head: grouped-query attention
    assert [x["group"] for x in r.results] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_path_patching(smollm2, headscope):
    r = smollm2.patch(**IOI, senders=[(28, 4)], input="q")
    assert r.direction == "noise" and r.path["senders"] == [[28, 4]] and r.path["input"] == "q"
    assert len(r.results) == 9  # every head of layer 29, one at a time
    m = r.map()
    assert m.shape == (30, 9) and np.isnan(m[:29]).all() and not np.isnan(m[29:]).any()
    first = r.results[0]
    assert first["receivers"] == [[29, 0]] and m[29, 0] == first["normalised"]
    assert first["normalised"] == pytest.approx(normalised(first["value"], r.clean, r.corrupt), rel=1e-12)
    direct = smollm2.patch(**IOI, senders="28.4", input="logits")
    assert len(direct.results) == 1 and direct.path["receivers"] == [] and direct.results[0]["receivers"] == []
    with pytest.raises(headscope.Error, match="to the logits is one result"):
        direct.map()
    together = smollm2.patch(**IOI, senders="28.4", receivers=[(29, 0), (29, 1)], input="k")
    assert len(together.results) == 1 and together.results[0]["receivers"] == [[29, 0], [29, 1]]
    with pytest.raises(headscope.Error, match="together is one result"):
        together.map()


def test_heads_together(smollm2, headscope):
    r = smollm2.patch(**IOI, heads=[(20, 0), (29, 1)])
    assert r.set["heads"] == [[20, 0], [29, 1]] and r.results == []
    assert r.set["normalised"] == pytest.approx(normalised(r.set["value"], r.clean, r.corrupt), rel=1e-12)
    with pytest.raises(headscope.Error, match="one result"):
        r.map()
    pytest.importorskip("pandas")
    assert r.to_frame().to_dict("records") == [
        {"heads": "20.0,29.1", "value": r.set["value"], "normalised": r.set["normalised"]}]


def test_patch_errors(smollm2, minilm, headscope):
    def error(model, **kw):
        with pytest.raises(headscope.Error) as e:
            model.patch(**kw)
        return str(e.value)

    message = error(smollm2, **{**IOI, "corrupt": "When Mary and John went to the big store, Mary gave a drink to"})
    assert "the clean prompt is 14 tokens and the corrupted one 15" in message
    message = error(smollm2, **{**IOI, "answer": " Mary Anne"})
    assert 'the answer " Mary Anne" is 2 tokens for this model; it must be one token' in message
    message = error(smollm2, **IOI, heads=[(30, 0)])
    assert "30.0 is not a head of SmolLM2-135M-Instruct.Q4_1 (layers 0..29, heads 0..8)" in message
    assert "is not a head" in error(smollm2, **IOI, senders="29.9")
    message = error(smollm2, **IOI, metric="cosine")
    assert "is a decoder: its metrics are logit_diff, prob and loss" in message
    message = error(minilm, clean="The cat sat.", corrupt="The dog sat.", metric="logit_diff")
    assert message.endswith('is an encoder: it has no next-token logits, so its patching metric is cosine '
                            '(1 − cos of the sentence embedding); ask for the cosine metric')
    assert 'unknown patching site "heads" (one of: head, head_position, q' in error(smollm2, **IOI, sites="heads")
    assert "give the answer token and the wrong one" in error(smollm2, clean=IOI["clean"], corrupt=IOI["corrupt"])
    assert "give the prompt pairs one way" in error(smollm2, **IOI, task="ioi")
    assert "give the prompt pairs one way" in error(smollm2)
    assert "two experiments" in error(smollm2, **IOI, heads="29.1", senders="20.0")
    assert "receivers= needs senders=" in error(smollm2, **IOI, receivers="29.1")
    assert 'missing "wrong"' in error(smollm2, pairs=[{"clean": "a", "corrupt": "b", "answer": " c"}])
    assert "layer" in error(smollm2, **IOI, layers=[30])


# ---- prompt pairs ----


def test_pair_generators(smollm2, headscope, tmp_path):
    ioi = headscope.ioi_pairs(smollm2, 4, seed=3)
    assert isinstance(ioi, list) and isinstance(ioi, headscope.PromptPairs) and len(ioi) == 4
    assert (ioi.task, ioi.seed, ioi.model) == ("ioi", 3, "SmolLM2-135M-Instruct.Q4_1")
    assert set(ioi[0]) == {"clean", "corrupt", "answer", "wrong", "variant"}
    assert {p["variant"] for p in ioi} <= {"ABBA", "BABA"}
    assert headscope.ioi_pairs(smollm2, 4, seed=3) == ioi and headscope.ioi_pairs(smollm2, 4, seed=4) != ioi
    induction = headscope.induction_pairs(smollm2, 2, seed=1, length=5)
    assert induction.task == "induction" and len(induction) == 2
    assert len(headscope.greater_than_pairs(smollm2, 3)) == 3
    # Written and read again: the file `headscope patch --pairs` takes.
    path = tmp_path / "ioi.json"
    headscope.write_pairs(path, ioi)
    assert json.loads(path.read_text())["task"] == "ioi"
    again = headscope.read_pairs(path)
    assert again == ioi and (again.task, again.seed) == ("ioi", 3)
    # The same pairs as a PromptPairs, a file, tuples or a task give the same results (one site: fast).
    def values(**kw):
        r = smollm2.patch(**kw, sites="attn", layers=[29])
        return r, [x["value"] for x in r.results]

    two = headscope.PromptPairs(ioi[:2], task="ioi", seed=3)
    headscope.write_pairs(tmp_path / "two.json", two)
    a, va = values(pairs=two)
    b, vb = values(pairs=tmp_path / "two.json")
    c, vc = values(pairs=[(p["clean"], p["corrupt"], p["answer"], p["wrong"]) for p in two])
    assert a.raw["task"] == b.raw["task"] == "ioi" and c.raw["task"] == "custom" and a.n_pairs == 2
    assert va == vb == vc and a.pairs == two
    t, vt = values(task="ioi", n=4, seed=3)
    assert t.pairs == ioi and t.n_pairs == 4 and np.isfinite(vt).all()
    bad = {"pairs": [{"clean": "a", "corrupt": "b", "answer": "c", "wrong": "d", "x": ""}]}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(headscope.Error, match='bad.json: pair 1: unknown field "x"'):
        headscope.read_pairs(tmp_path / "bad.json")
    with pytest.raises(headscope.Error, match="between 1 and"):
        headscope.ioi_pairs(smollm2, 0)


# ---- the logit lens ----


def test_logit_lens_is_the_models_prediction(smollm2, headscope):
    text = "The capital of France is"
    lens = smollm2.logit_lens(text, tokens=[" Paris", 0], logits=True)
    T = len(smollm2.tokenizer.encode(text))
    rows = smollm2.config.n_layer + 1
    assert lens.position == T - 1 and lens.tokens == smollm2.tokenizer.encode(text).tokens
    assert lens.top_ids.shape == lens.top_logits.shape == lens.top_probs.shape == (rows, 10)
    assert lens.top_ids.dtype == np.int32 and lens.top_probs.dtype == np.float32
    assert lens.logits.shape == (rows, smollm2.config.vocab_size) and lens.logits.dtype == np.float32
    paris = smollm2.tokenizer.encode(" Paris", special_tokens=False).ids[0]
    assert lens.token_ids == [paris, 0] and lens.token_probs.shape == lens.token_ranks.shape == (rows, 2)
    # The last row is the model's own next-token prediction: greedy generation's first token.
    g = smollm2.generate(text, 1)
    _, first_id, _, first_logit = g.generated[0]
    assert lens.top_ids[-1, 0] == first_id and lens.top_text[-1][0] == smollm2.tokenizer.decode([first_id])
    assert lens.top_logits[-1, 0] == pytest.approx(first_logit, rel=1e-5)
    assert lens.logits[-1, first_id] == pytest.approx(first_logit, rel=1e-5)
    # Probabilities: a softmax over the whole vocabulary of each row, computed here in float64 (atol:
    # what float32 cannot hold, e.g. 0's probability at the embeddings, 5e-51, reads 0).
    x = lens.logits.astype(np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(lens.top_probs, np.take_along_axis(p, lens.top_ids.astype(np.int64), 1), rtol=1e-5,
                               atol=1e-37)
    np.testing.assert_allclose(lens.token_probs, p[:, lens.token_ids], rtol=1e-5, atol=1e-37)
    np.testing.assert_array_equal(lens.top_logits, np.take_along_axis(lens.logits, lens.top_ids.astype(np.int64), 1))
    ranks = np.stack([(lens.logits > lens.logits[:, [i]]).sum(axis=1) for i in lens.token_ids], axis=1)
    np.testing.assert_array_equal(lens.token_ranks, ranks)
    assert (lens.top_ids == np.argsort(-lens.logits, axis=1, kind="stable")[:, :10]).all()
    # Without logits=True only the top tokens and the named ones are kept; the same numbers.
    small = smollm2.logit_lens(text, position=T - 1, tokens=[" Paris"])
    assert small.logits is None
    np.testing.assert_array_equal(small.top_ids, lens.top_ids)
    np.testing.assert_array_equal(small.token_probs[:, 0], lens.token_probs[:, 0])
    earlier = smollm2.logit_lens(text, position=1, top_k=3)
    assert earlier.position == 1 and earlier.top_ids.shape == (rows, 3) and earlier.token_logits.shape == (rows, 0)


def test_logit_lens_errors(smollm2, minilm, headscope):
    with pytest.raises(headscope.Error, match="is an encoder: the logit lens .* needs a decoder"):
        minilm.logit_lens("The capital of France is", tokens=[" paris"])
    with pytest.raises(headscope.Error, match="\" Paris Hilton\" is 3 tokens"):
        smollm2.logit_lens("The capital of France is", tokens=[" Paris Hilton"])
    with pytest.raises(headscope.Error, match="position 5 is outside the text's 5 tokens"):
        smollm2.logit_lens("The capital of France is", position=5)
    with pytest.raises(headscope.Error, match="position -6 is outside"):
        smollm2.logit_lens("The capital of France is", position=-6)
    with pytest.raises(headscope.Error, match="outside the vocabulary"):
        smollm2.logit_lens("The capital of France is", tokens=[smollm2.config.vocab_size])
    with pytest.raises(headscope.Error, match="top_k must be at least 1"):
        smollm2.logit_lens("The capital of France is", top_k=0)


def test_logit_lens_gemma3():
    import headscope

    if not GEMMA3.exists():
        pytest.skip(f"{GEMMA3} is not set up")
    gemma = headscope.load(GEMMA3, threads=THREADS)
    lens = gemma.logit_lens("The capital of France is", logits=True)
    assert lens.logits.shape == (19, 262144) and lens.logits.nbytes == 19 * 262144 * 4  # 19 MiB, on request
    assert lens.top_ids[-1, 0] == gemma.generate("The capital of France is", 1).generated[0][1]


def test_head_lens_equals_cli_and_attribution(smollm2, cli, tmp_path, headscope):
    text = IOI["clean"]
    h = smollm2.head_lens(text, 23, 3, tokens=[" Mary", " John"], top_k=5)
    assert (h.layer, h.head, h.kv_head, h.position) == (23, 3, 1, 13)
    assert h.effects.dtype == np.float64 and h.effects.shape == (smollm2.config.vocab_size,)
    # The lists are read off the effect vector.
    assert h.promoted_ids == list(np.argsort(-h.effects, kind="stable")[:5])
    assert h.suppressed_ids == list(np.argsort(h.effects, kind="stable")[:5])
    assert h.token_effects == [h.effects[i] for i in h.token_ids]
    assert h.token_ranks == [int((h.effects > h.effects[i]).sum()) for i in h.token_ids]
    # The CLI writes the same numbers (one pipeline).
    out = tmp_path / "head.json"
    subprocess.run([str(cli), "lens", "--model", str(SMOLLM2), "--text", text, "--head", "23.3", "--token", " Mary",
                    "--token", " John", "--top-k", "5", "--threads", str(THREADS), "--json", str(out)],
                   check=True, capture_output=True, timeout=300)
    want = json.loads(out.read_text())
    assert want["schema"] == "headscope.head_lens/1"
    assert [e["id"] for e in want["promoted"]] == h.promoted_ids
    assert [e["logit"] for e in want["followed"]] == h.token_effects
    assert [e["model_logit"] for e in want["followed"]] == h.token_model_logits
    # Its effect on " Mary" minus " John" is its direct logit attribution in `run --dla`.
    dla = tmp_path / "dla.json"
    mary, john = h.token_ids
    subprocess.run([str(cli), "run", "--model", str(SMOLLM2), "--text", text, "--no-probe", "--threads", str(THREADS),
                    "--dla", str(dla), "--dla-contrast", str(john)], check=True, capture_output=True, timeout=300)
    last = [a for a in json.loads(dla.read_text())["attributions"] if a["position"] == 13 and a["contrast"] == john][0]
    assert last["target"] == mary
    assert h.token_effects[0] - h.token_effects[1] == pytest.approx(last["heads"][23][3], rel=1e-9, abs=1e-12)
    frame = h.to_frame()
    assert list(frame.columns) == ["kind", "id", "text", "effect", "rank"] and len(frame) == 12
    assert "HeadLens 23.3" in repr(h)
    # Errors, in words.
    with pytest.raises(headscope.Error, match="no head 30.0"):
        smollm2.head_lens(text, 30, 0)
    with pytest.raises(headscope.Error, match="layer = -1 is not a layer"):
        smollm2.head_lens(text, -1, 0)
    with pytest.raises(headscope.Error, match="position 14 is outside"):
        smollm2.head_lens(text, 0, 0, position=14)
    with pytest.raises(headscope.Error, match="is 3 tokens"):
        smollm2.head_lens(text, 0, 0, tokens=[" Paris Hilton"])


def test_head_lens_encoder_is_refused(minilm, headscope):
    with pytest.raises(headscope.Error, match="not a causal model.*needs a decoder"):
        minilm.head_lens("The capital of France is", 0, 0)


def test_help_states_shapes(headscope):
    text = pydoc.render_doc(headscope.PatchResult, renderer=pydoc.plaintext)
    for shape in ["[n_layer, n_head]", "[n_layer, n_kv_head]", "[n_layer, n_tokens]", "[n_layer, n_head, n_tokens]"]:
        assert shape in text, shape
    assert "[R, top_k]" in pydoc.render_doc(headscope.LogitLens, renderer=pydoc.plaintext)
    assert "float32 [n_layer + 1, vocab_size]" in pydoc.render_doc(headscope.Model.logit_lens, renderer=pydoc.plaintext)
    assert pathlib.Path(headscope.__file__).with_name("_core.pyi").read_text().count("def patch(") == 1
