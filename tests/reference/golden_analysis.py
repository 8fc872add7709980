"""Goldens for the analysis layer, computed independently of the C++ code.

1. Fixed-offset and coreference baselines on the gold data, in plain Python, for
   tests/unit/analysis_syntax_test.cc and analysis_coref_test.cc. Writes analysis_baselines.json:
  treebanks: {file name: {relation: {"support": n, "offsets": {"-5": correct, ..., "5": correct}}}}
             (relation = DEPREL before ':'; "all" pools every relation; root attachments left out)
  gap:       {file name: {"decidable": n, "nearest": correct, "first": correct}}
2. The atlas pipeline on a slice of the gold data with transformers as the oracle, for
   tests/unit/analysis_atlas_test.cc: the first PIPELINE_SENTENCES sentences of UD PUD and the first
   PIPELINE_GAP examples of GAP validation are copied to atlas_pud.conllu / atlas_gap.tsv, run through
   the model (eager attention, fp32), merged to word level (to = sum, from = mean) and scored the
   Clark et al. way; writes atlas_pipeline.json with per-head correct counts (both directions, all
   relations), per-head token- and word-level statistics, and per-head GAP correct counts.
The data directory is $HEADSCOPE_DATA, else ../shared/data beside the repository.
"""
import csv
import json
import os
import pathlib

MAX_OFFSET = 5
TREEBANKS = ["ud/en_ewt-ud-dev.conllu", "ud/en_pud-ud-test.conllu"]
GAP_FILES = ["gap/gap-development.tsv", "gap/gap-validation.tsv"]


def data_dir() -> pathlib.Path:
    env = os.environ.get("HEADSCOPE_DATA")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(__file__).resolve().parents[2].parent / "shared" / "data"


def read_sentences(path):
    """Yields lists of (head, relation) per sentence; skips ranges (3-4) and empty nodes (5.1)."""
    words = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if words:
                    yield words
                words = []
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if "-" in cols[0] or "." in cols[0]:
                continue
            words.append((int(cols[6]), cols[7].split(":")[0]))
    if words:
        yield words


def treebank_baselines(path):
    table = {}

    def bump(rel, offset):
        entry = table.setdefault(rel, {"support": 0, "offsets": {str(d): 0 for d in range(-MAX_OFFSET, MAX_OFFSET + 1) if d}})
        if offset is None:
            entry["support"] += 1
        else:
            entry["offsets"][str(offset)] += 1

    for words in read_sentences(path):
        for i, (head, rel) in enumerate(words, start=1):
            if head == 0:
                continue
            for name in (rel, "all"):
                bump(name, None)
                for d in range(-MAX_OFFSET, MAX_OFFSET + 1):
                    if d and i + d == head:
                        bump(name, d)
    return table


def gap_baselines(path):
    decidable = nearest = first = 0
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        for r in rows:
            a_true, b_true = r["A-coref"] == "TRUE", r["B-coref"] == "TRUE"
            if a_true == b_true:
                continue
            decidable += 1
            p0 = int(r["Pronoun-offset"])
            p1 = p0 + len(r["Pronoun"])
            spans = {}
            for c in ("A", "B"):
                s = int(r[c + "-offset"])
                spans[c] = (s, s + len(r[c]))

            def gap(span):
                if span[1] <= p0:
                    return p0 - span[1]
                if p1 <= span[0]:
                    return span[0] - p1
                return 0

            # Text is ASCII in GAP, so character and byte distances agree; ties go to A.
            pick = "A" if gap(spans["A"]) <= gap(spans["B"]) else "B"
            nearest += (pick == "A") == a_true
            pick = "A" if spans["A"][0] <= spans["B"][0] else "B"
            first += (pick == "A") == a_true
    return {"decidable": decidable, "nearest": nearest, "first": first}


PIPELINE_SENTENCES = 40
PIPELINE_GAP = 40


def conllu_blocks(path, n):
    """The first n sentence blocks of a CoNLL-U file, verbatim."""
    blocks, cur = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                cur.append(line)
            elif cur:
                blocks.append("".join(cur))
                cur = []
                if len(blocks) == n:
                    break
    return blocks


def head_stats(att, special):
    """att [H, T, T] float64, bidirectional, no padding. Returns per-head sums over queries of
    entropy bits, sink mass, previous-token mass (and the count of queries with a previous key)."""
    import numpy as np
    H, T, _ = att.shape
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(att > 0, att * np.log2(att), 0.0).sum(-1).sum(-1)  # [H]
    sink_keys = special.copy()
    sink_keys[0] = True
    sink = att[:, :, sink_keys].sum(-1).sum(-1)
    prev = sum(att[:, q, q - 1] for q in range(1, T)) if T > 1 else np.zeros(H)
    return ent, sink, prev, T, T - 1


def pipeline(model_dir, root, out_dir):
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(1)  # tiny sequences: threads only add contention on a shared CI machine
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads

    def run(text):
        enc = tok(text, return_offsets_mapping=True, return_special_tokens_mask=True, return_tensors="pt")
        offsets = enc.pop("offset_mapping")[0].tolist()
        special = np.array(enc.pop("special_tokens_mask")[0].tolist(), dtype=bool)
        with torch.no_grad():
            out = model(**enc, output_attentions=True)
        att = torch.stack(out.attentions)[:, 0].double().numpy()  # [L, H, T, T]
        return enc, offsets, special, att

    # ---- dependency slice ----
    blocks = conllu_blocks(root / TREEBANKS[1], PIPELINE_SENTENCES)
    (out_dir / "atlas_pud.conllu").write_text("\n".join(blocks) + "\n", encoding="utf-8")
    correct = np.zeros((L * H, 2), dtype=np.int64)
    support = 0
    tok_sums = {k: np.zeros(L * H) for k in ("entropy", "sink", "prev")}
    word_entropy = np.zeros(L * H)
    n_tok = n_prev = n_words_q = 0
    for block in blocks:
        rows = [ln.split("\t") for ln in block.splitlines() if not ln.startswith("#")]
        rows = [r for r in rows if "-" not in r[0] and "." not in r[0]]
        forms = [r[1] for r in rows]
        heads = [int(r[6]) for r in rows]
        text = " ".join(forms)
        spans, pos = [], 0
        for f in forms:
            spans.append((pos, pos + len(f)))
            pos += len(f) + 1
        enc, offsets, special, att = run(text)
        T = att.shape[-1]
        # Units in token order: each special token alone, each word once (Python offsets are characters).
        unit_of_token, word_of_unit, unit_of_word = [], [], {}
        for t in range(T):
            if special[t]:
                unit_of_token.append(len(word_of_unit))
                word_of_unit.append(-1)
                continue
            w = next(i for i, (b, e) in enumerate(spans) if b <= offsets[t][0] < e)
            if w not in unit_of_word:
                unit_of_word[w] = len(word_of_unit)
                word_of_unit.append(w)
            unit_of_token.append(unit_of_word[w])
        U = len(word_of_unit)
        M = np.zeros((U, T))  # token → unit membership
        for t, u in enumerate(unit_of_token):
            M[u, t] = 1.0
        a = att.reshape(L * H, T, T)
        words = (M / M.sum(1, keepdims=True)) @ a @ M.T  # [LH, U, U]: rows mean, columns sum
        is_word = np.array([w >= 0 for w in word_of_unit])
        for i, h in enumerate(heads):
            if h == 0:
                continue
            support += 1
            u, gold = unit_of_word[i], h - 1
            for d, m in enumerate((words[:, u, :], words[:, :, u])):  # dependent → head, head → dependent
                m = m.copy()
                m[:, ~is_word] = -1.0
                m[:, u] = -1.0
                pred = np.array(word_of_unit)[m.argmax(-1)]
                correct[:, d] += pred == gold
        e, s, p, nq, npv = head_stats(a, special)
        tok_sums["entropy"] += e
        tok_sums["sink"] += s
        tok_sums["prev"] += p
        n_tok += nq
        n_prev += npv
        we, _, _, nu, _ = head_stats(words, ~is_word)
        word_entropy += we
        n_words_q += nu

    # ---- coreference slice ----
    with open(root / GAP_FILES[1], encoding="utf-8") as f:
        lines = f.readlines()[: PIPELINE_GAP + 1]
    (out_dir / "atlas_gap.tsv").write_text("".join(lines), encoding="utf-8")
    gap_correct = np.zeros(L * H, dtype=np.int64)
    gap_support = 0
    for r in csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE):
        a_true, b_true = r["A-coref"] == "TRUE", r["B-coref"] == "TRUE"
        if a_true == b_true:
            continue
        enc, offsets, special, att = run(r["Text"])
        word_ids = enc.word_ids() if hasattr(enc, "word_ids") else None
        a = att.reshape(L * H, att.shape[-2], att.shape[-1])

        def overlapping(begin, end):
            return [t for t, (b, e) in enumerate(offsets) if not special[t] and b < end and e > begin]

        p0 = int(r["Pronoun-offset"])
        pron = overlapping(p0, p0 + len(r["Pronoun"]))
        frm = a[:, pron, :].mean(1)  # [LH, T]

        def to(name, off):
            toks = overlapping(off, off + len(name))
            per_word = {}
            for t in toks:
                per_word.setdefault(word_ids[t], []).append(t)
            return np.max(np.stack([frm[:, ts].sum(-1) for ts in per_word.values()]), axis=0)

        ta, tb = to(r["A"], int(r["A-offset"])), to(r["B"], int(r["B-offset"]))
        gap_support += 1
        gap_correct += (ta > tb) if a_true else (tb > ta)

    out = {
        "n_layer": L, "n_head": H, "sentences": len(blocks), "support": support,
        "correct": correct.tolist(),
        "token_entropy_bits": (tok_sums["entropy"] / n_tok).tolist(),
        "token_sink_mass": (tok_sums["sink"] / n_tok).tolist(),
        "token_prev_mass": (tok_sums["prev"] / n_prev).tolist(),
        "word_entropy_bits": (word_entropy / n_words_q).tolist(),
        "gap_support": gap_support, "gap_correct": gap_correct.tolist(),
    }
    (out_dir / "atlas_pipeline.json").write_text(json.dumps(out))


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    root = data_dir()
    pipeline(model_dir, root, out_dir)
    out = {"treebanks": {}, "gap": {}}
    for rel in TREEBANKS:
        out["treebanks"][pathlib.Path(rel).name] = treebank_baselines(root / rel)
    for rel in GAP_FILES:
        out["gap"][pathlib.Path(rel).name] = gap_baselines(root / rel)
    (out_dir / "analysis_baselines.json").write_text(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    import sys

    main(pathlib.Path("."), pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "."))
