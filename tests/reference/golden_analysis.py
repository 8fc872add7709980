"""Fixed-offset and coreference baselines on the gold data, computed in plain Python, independently
of the C++ readers and scorers, for tests/unit/analysis_syntax_test.cc and analysis_coref_test.cc.

Writes analysis_baselines.json:
  treebanks: {file name: {relation: {"support": n, "offsets": {"-5": correct, ..., "5": correct}}}}
             (relation = DEPREL before ':'; "all" pools every relation; root attachments left out)
  gap:       {file name: {"decidable": n, "nearest": correct, "first": correct}}
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


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    root = data_dir()
    out = {"treebanks": {}, "gap": {}}
    for rel in TREEBANKS:
        out["treebanks"][pathlib.Path(rel).name] = treebank_baselines(root / rel)
    for rel in GAP_FILES:
        out["gap"][pathlib.Path(rel).name] = gap_baselines(root / rel)
    (out_dir / "analysis_baselines.json").write_text(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    import sys

    main(pathlib.Path("."), pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "."))
