"""Model.grad, Model.saliency and Model.attribution_patch (docs/gradients.md) against the CLI's
`headscope grad --npy`, `saliency --json` and `patch --method attribution --json` on the same
model and threads (the same pipeline: equal bit for bit), and against identities computed here
with numpy: gradient x input from the gradients, integrated gradients' completeness, the
receivers of a layer summing to what its attention block sends back, and attribution patching's
head estimates as (o_clean - o_corrupt) . grad from the package's own runs and gradients."""
import json
import subprocess

import numpy as np
import pytest

from conftest import MINILM, THREADS

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPT = "When Alice and Bob went to the store, Carl gave a drink to"
SENTENCE = "The trophy doesn't fit into the brown suitcase because it is too large."
REFERENCE = "A cat sat quietly on the warm windowsill."


def test_grad_equals_the_cli(minilm, cli, tmp_path):
    g = minilm.grad(SENTENCE, reference=REFERENCE, receivers=True)
    subprocess.run([str(cli), "grad", "-m", str(MINILM), "--text", SENTENCE, "--reference", REFERENCE, "--receivers",
                    "--npy", str(tmp_path), "--json", str(tmp_path / "g.json"), "--threads", str(THREADS)],
                   check=True, capture_output=True)
    doc = json.loads((tmp_path / "g.json").read_text())
    assert g.value == pytest.approx(doc["value"], abs=1e-12)
    for name in ("embeddings", "hidden_states", "head_outputs", "attention", "queries", "receivers"):
        np.testing.assert_array_equal(getattr(g, name), np.load(tmp_path / f"{name}.npy"), err_msg=name)
    np.testing.assert_allclose(g.grad_x_input(), [t["grad_x_input"] for t in doc["tokens"]], rtol=1e-6, atol=1e-9)


def test_receivers_sum_to_the_attention_blocks_share(minilm):
    # An encoder's heads read the stream itself: ∂/∂x_l = (through the attention block) + (the
    # LayerNorm after it), and the 3·n_head receivers are the first part, split by path.
    g = minilm.grad(SENTENCE, reference=REFERENCE, receivers=True)
    c = minilm.config
    for layer in range(c.n_layer):
        through_heads = g.receivers[layer].astype(np.float64).sum(0)
        # the block's input gradient minus the skip path: ∂x_l − ∂(attention output) (x_l + a feeds LN)
        skip = g.attn_output[layer].astype(np.float64)
        np.testing.assert_allclose(through_heads + skip, g.hidden_states[layer], rtol=0, atol=2e-5 * np.abs(
            g.hidden_states[layer]).max())


def test_integrated_gradients_are_complete(minilm):
    s = minilm.saliency(SENTENCE, reference=REFERENCE, steps=64)
    assert s.completeness_gap == pytest.approx(abs(s.scores.sum() - (s.value - s.baseline_value)), abs=1e-9)
    assert s.completeness_gap <= 0.02 * abs(s.value - s.baseline_value)
    assert s.scores[0] == 0 and s.scores[-1] == 0  # [CLS] and [SEP] kept in the baseline
    assert s.attributions.shape == (len(s.tokens), minilm.config.d_model)


def test_gradient_times_input_is_the_gradient_times_the_embeddings(minilm):
    s = minilm.saliency(SENTENCE, reference=REFERENCE, method="grad_x_input")
    g = minilm.grad(SENTENCE, reference=REFERENCE)
    np.testing.assert_allclose(s.scores, g.grad_x_input(), rtol=1e-5, atol=1e-9)


def test_attribution_patch_heads_are_the_linear_estimate(smollm2, cli, tmp_path):
    r = smollm2.attribution_patch(clean=CLEAN, corrupt=CORRUPT, answer=" Mary", wrong=" John", sites="head")
    g = smollm2.grad(CORRUPT, answer=" Mary", wrong=" John", attention=False, qkv=False)
    clean = smollm2.run(CLEAN, capture=["head_outputs"]).head_outputs.astype(np.float64)
    corrupt = smollm2.run(CORRUPT, capture=["head_outputs"]).head_outputs.astype(np.float64)
    want = g.value + ((clean - corrupt) * g.head_outputs).sum(axis=(2, 3))
    np.testing.assert_allclose(r.map("head", normalised=False), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    out = tmp_path / "a.json"
    subprocess.run([str(cli), "patch", "-m", str(smollm2.path), "--clean", CLEAN, "--corrupt", CORRUPT, "--answer",
                    " Mary", "--wrong", " John", "--method", "attribution", "--json", str(out), "--threads",
                    str(THREADS)], check=True, capture_output=True)
    doc = json.loads(out.read_text())
    assert [e["value"] for e in doc["attribution"]["results"]] == [e["value"] for e in r.estimates]


def test_gradient_requests_are_refused_in_words(headscope, minilm, smollm2):
    with pytest.raises(headscope.Error, match="reference text"):
        minilm.grad(SENTENCE)
    with pytest.raises(headscope.Error, match="answer"):
        smollm2.grad(CLEAN)
    with pytest.raises(headscope.Error, match="wrong token"):
        smollm2.saliency(CLEAN, answer=" Mary")
    with pytest.raises(headscope.Error, match="encoder"):
        minilm.attribution_patch(clean=SENTENCE, corrupt=SENTENCE, edges=True)
    with pytest.raises(headscope.Error, match="integration rule"):
        smollm2.saliency(CLEAN, answer=" Mary", wrong=" John", rule="simpson")
