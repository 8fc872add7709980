"""The package's attention against Hugging Face transformers (the engine's bound: 1e-5), reusing
the reference tests' helpers (tests/reference/test_forward.py)."""
import sys

import numpy as np
import pytest

from conftest import MINILM, ROOT, TEXT

sys.path.insert(0, str(ROOT / "tests" / "reference"))


def test_attention_matches_transformers(minilm):
    transformers = pytest.importorskip("transformers")
    from test_forward import ATTN_TOL, HIDDEN_TOL, reference

    hf = transformers.AutoModel.from_pretrained(MINILM, attn_implementation="eager").float().eval()
    tok = transformers.AutoTokenizer.from_pretrained(MINILM)
    for text in [TEXT, "Ünïcödé café naïve — “quotes”, 東京タワー 🙂!", "x"]:
        ids = tok(text)["input_ids"]
        result = minilm.run(text, capture=("attention", "hidden_states"))
        assert result.ids == ids
        attn, hidden = reference(hf, ids)
        assert np.abs(result.attention - attn).max() <= ATTN_TOL
        assert np.abs(result.hidden_states - hidden).max() <= HIDDEN_TOL
