"""`headscope run --words`: word-level statistics, checked against a merge done here in numpy
from the token-level attention that the same run wrote (TO a word = sum over its pieces, FROM a
word = mean over its pieces; special tokens stay units of their own)."""
import json
import os
import pathlib
import subprocess

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("HEADSCOPE_BIN", str(ROOT / "build" / "headscope"))
MODEL = pathlib.Path(os.environ.get("HEADSCOPE_MODEL", ROOT / "models" / "all-MiniLM-L6-v2"))


def test_word_level_statistics_match_an_independent_merge(tmp_path):
    text = "Playing unbelievably well, she outplayed everyone in the tournament."
    proc = subprocess.run([BIN, "run", "--model", str(MODEL), "--text", text, "--words", "--json",
                           str(tmp_path / "run.json"), "--npy", str(tmp_path), "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["level"] == "word"
    att = np.load(tmp_path / "attentions.npy").astype(np.float64)  # [L, H, T, T]
    tokens = run["tokens"]
    units, unit_of = [], []
    for i, t in enumerate(tokens):  # a special token is its own unit; pieces of one word share one
        key = ("special", i) if t["special"] else ("word", t["word"])
        if key not in units:
            units.append(key)
        unit_of.append(units.index(key))
    U, T = len(units), len(tokens)
    assert U < T  # the text has words split into pieces
    member = np.zeros((U, T))
    for i, u in enumerate(unit_of):
        member[u, i] = 1.0
    from_mean = member / member.sum(axis=1, keepdims=True)
    L, H = att.shape[:2]
    for head in run["heads"]:
        words = from_mean @ att[head["layer"], head["head"]] @ member.T  # [U, U]
        assert np.allclose(words.sum(axis=1), 1.0)
        want_max = words.max(axis=1).mean()
        p = np.where(words > 0, words, 1.0)
        want_entropy = (-(words * np.log2(p)).sum(axis=1)).mean()
        assert abs(head["stats"]["max_attention"] - want_max) < 1e-5
        assert abs(head["stats"]["entropy_bits"] - want_entropy) < 1e-4
