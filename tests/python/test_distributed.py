"""headscope.distributed on a real Ray cluster of two nodes started on this machine (`ray start
--head` and a second `ray start --address`, one CPU each, torn down afterwards): the job's merged
statistics and its records equal one process's Model.corpus bit for bit on 200 EWT sentences;
a worker killed in the middle of a job changes nothing; a malformed text is reported while the rest
completes; a model path the workers cannot read is an error naming the node; the atlas of 200 EWT
(and PUD) sentences and 40 GAP rows equals one process's; every head's importance
over EWT sentences equals one process's, and so does a patching sweep over pairs. Also the CLI's
shards: `headscope run --corpus --partial` on two halves and `headscope merge` equal one run."""
import os
import pathlib
import secrets
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import MINILM

# Ray's token authentication, with a token of this test's own, for the nodes and the driver; set
# before ray is imported, which reads it then.
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
os.environ.update(AUTH)
ray = pytest.importorskip("ray")

DATA = pathlib.Path(os.environ.get("HEADSCOPE_DATA", pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"))
RAY = pathlib.Path(sys.executable).parent / "ray"


def ewt_sentences(n):
    texts = []
    for line in open(DATA / "ud" / "en_ewt-ud-dev.conllu", encoding="utf-8"):
        if line.startswith("# text = "):
            texts.append(line[len("# text = "):].rstrip("\n"))
            if len(texts) == n:
                break
    return texts


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes of one CPU each on this machine; the driver connected to them."""
    port = free_port()
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", OMP_NUM_THREADS="1")
    common = ["--num-cpus", "1", "--disable-usage-stats"]
    subprocess.run([RAY, "start", "--head", "--port", str(port), "--include-dashboard", "false",
                    "--node-ip-address", "127.0.0.1", *common],
                   check=True, env=env, capture_output=True)
    try:
        subprocess.run([RAY, "start", "--address", f"127.0.0.1:{port}", "--node-ip-address", "127.0.0.1", *common],
                       check=True, env=env, capture_output=True)
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False)
        deadline = time.monotonic() + 60
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            assert time.monotonic() < deadline, "the second node did not join"
            time.sleep(0.5)
        yield port
    finally:
        ray.shutdown()
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True)


@pytest.fixture(scope="module")
def reference(headscope):
    """One process, one thread: what the cluster must give."""
    model = headscope.load(MINILM, threads=1)
    texts = ewt_sentences(200) + ["", "A last short sentence."]
    return texts, model.corpus(texts, probe=False, corpus=False)


def run_job(distributed, texts, tmp_path, **kw):
    return distributed.corpus(MINILM, texts, texts_per_batch=16, records_dir=tmp_path / "records", probe=False,
                              evidence=False, progress=False, **kw)


def test_two_nodes_give_the_single_process_result(cluster, reference, tmp_path):
    import headscope.distributed as distributed

    texts, one = reference
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    result = run_job(distributed, texts, tmp_path)
    assert result.stats == one.stats, "merged partials differ from the single process's statistics"
    assert result.stats.texts == len(texts) - 1 and result.batches == (len(texts) + 15) // 16  # the empty one failed
    assert result.failures == one.failures and result.failures[0]["text"] == 200  # the empty text
    records = result.records()
    assert records.shape == one.records.shape
    for column in ("text", "layer", "head", "entropy_bits", "max_attention", "sink_mass", "role"):
        assert (records[column].values == one.records[column].values).all(), column


def test_the_atlas_on_two_nodes_is_the_single_process_atlas(cluster, headscope, tmp_path):
    """The atlas of MiniLM over the first 200 sentences of each treebank and 40 rows of each GAP
    file, in items of 25 on two nodes: the one-process atlas, every number of its JSON bit for bit
    (the timings aside), and the same Markdown report."""
    import headscope.distributed as distributed

    one = headscope.load(MINILM, threads=1).atlas(DATA, max_sentences=200, max_gap_rows=40, importance_texts=0,
                                                  progress=False)
    got = distributed.atlas(MINILM, DATA, max_sentences=200, max_gap_rows=40, importance_texts=0,
                            items_per_batch=25, out_dir=tmp_path, progress=False)
    a, b = dict(one["json"]), dict(got["json"])
    a.pop("seconds", None), b.pop("seconds", None)
    assert a == b
    assert a["counts"]["report_sentences"] > 150, a["counts"]
    # The per-head table, written as Parquet: the single process's heads, roles and statistics.
    import pandas as pd

    table = pd.read_parquet(tmp_path / "atlas_heads.parquet")
    assert len(table) == len(a["heads"]) == 72
    for i in (0, 17, 71):
        h = a["heads"][i]
        row = table.iloc[i]
        assert (row["layer"], row["head"], row["role"]) == (h["layer"], h["head"], h["roles"]["primary"]["id"])
        assert row["stats.entropy_bits"] == h["stats"]["entropy_bits"]
        assert row["word_stats.max_attention"] == h["word_stats"]["max_attention"]


def test_importance_on_two_nodes_is_the_single_process_importance(cluster, headscope, tmp_path):
    """Every MiniLM head zero-ablated alone over 12 EWT sentences, in batches of 5 on two nodes: the
    ranks, effects, proxies and Spearman's rho of one process, bit for bit."""
    import headscope.distributed as distributed

    texts = ewt_sentences(12)
    one = headscope.load(MINILM, threads=1).importance(texts)
    got = distributed.importance(MINILM, texts, texts_per_batch=5, out_dir=tmp_path, progress=False)
    assert got["shape"] == one["shape"] and got["tokens"] == one["tokens"]
    assert got["importance"] == one["importance"]  # layer, head, ablation, proxy, rank: equal floats
    assert got["spearman"] == one["spearman"]
    import pandas as pd

    table = pd.read_parquet(tmp_path / "importance.parquet")
    assert table.to_dict("records") == one["importance"]  # a row per head, the same floats
    assert got["frame"].to_dict("records") == one["importance"]


def test_patching_on_two_nodes_is_the_single_process_sweep(cluster, headscope, tmp_path):
    """A head and MLP sweep of MiniLM over up to 6 EWT-derived pairs in batches of 4 on two nodes:
    the single process's clean, corrupt and every site's value, bit for bit."""
    import headscope.distributed as distributed

    texts = ewt_sentences(40)
    pairs = []
    for clean in texts:  # a corrupted prompt of the same length: the first word swapped for another
        words = clean.split()
        if len(words) >= 4 and len(pairs) < 6:
            pairs.append({"clean": clean, "corrupt": " ".join(["Nobody"] + words[1:]), "answer": "", "wrong": ""})
    model = headscope.load(MINILM, threads=1)
    counted = [p for p in pairs if len(model.tokenizer.encode(p["clean"]).ids) == len(model.tokenizer.encode(p["corrupt"]).ids)]
    assert len(counted) >= 3, "too few pairs of equal token counts"
    one = model.patch(pairs=counted, sites="head,mlp")
    got = distributed.patch(MINILM, counted, sites="head,mlp", pairs_per_batch=2, out_dir=tmp_path, progress=False)
    assert (got.clean, got.corrupt, got.n_pairs, got.metric) == (one.clean, one.corrupt, one.n_pairs, one.metric)
    assert got.results == one.results  # every site's value and normalised effect: equal floats
    assert (got.map("head", normalised=False) == one.map("head", normalised=False)).all()
    import pandas as pd

    table = pd.read_parquet(tmp_path / "patch.parquet")
    assert table.equals(one.to_frame()), (table.head(), one.to_frame().head())


def test_a_worker_killed_mid_job_changes_nothing(cluster, reference, tmp_path):
    import headscope.distributed as distributed

    texts, one = reference
    killed = []

    def kill_one_worker(done, _total):
        if killed or done < 1:
            return
        pids = subprocess.run(["pgrep", "-f", r"MapBatches\(_CorpusWorker\)"], capture_output=True, text=True)
        for pid in pids.stdout.split():
            if int(pid) != os.getpid():
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
                break

    result = distributed.corpus(MINILM, texts, texts_per_batch=8, records_dir=tmp_path / "records", probe=False,
                                evidence=False, progress=kill_one_worker)
    assert killed, "no worker process was found to kill"
    assert result.batches == (len(texts) + 7) // 8, "a batch was lost or counted twice"
    assert result.stats == one.stats
    assert result.failures == one.failures


def test_a_model_the_workers_cannot_read_names_the_node(cluster, tmp_path):
    import headscope.distributed as distributed

    with pytest.raises(Exception) as info:
        distributed.corpus(tmp_path / "no-such-model", ["A text."], probe=False, evidence=False, progress=False)
    message = str(info.value)
    assert "cannot load the model" in message and socket.gethostname() in message, message


def test_cli_shards_merge_to_one_run(cli, tmp_path):
    texts = ewt_sentences(120)
    whole, first, second = (tmp_path / f"{n}.txt" for n in ("whole", "first", "second"))
    whole.write_text("\n".join(texts) + "\n")
    first.write_text("\n".join(texts[:50]) + "\n")
    second.write_text("\n".join(texts[50:]) + "\n")
    run = [cli, "run", "-m", MINILM, "--no-probe", "--no-corpus", "--corpus"]
    env = dict(os.environ, OMP_NUM_THREADS="2")
    subprocess.run([*run, whole, "--partial", tmp_path / "whole.cbor", "--stats", tmp_path / "whole.json"],
                   check=True, env=env, capture_output=True)
    subprocess.run([*run, first, "--partial", tmp_path / "a.cbor", "--batch-tokens", "100"], check=True, env=env,
                   capture_output=True)
    subprocess.run([*run, second, "--partial", tmp_path / "b.cbor"], check=True, env=env, capture_output=True)
    subprocess.run([cli, "merge", tmp_path / "b.cbor", tmp_path / "a.cbor", "--stats", tmp_path / "merged.json",
                    "--partial", tmp_path / "merged.cbor"], check=True, capture_output=True)
    assert (tmp_path / "merged.cbor").read_bytes() == (tmp_path / "whole.cbor").read_bytes()
    assert (tmp_path / "merged.json").read_text() == (tmp_path / "whole.json").read_text()
    bad = subprocess.run([cli, "merge", tmp_path / "whole.txt", "--stats", tmp_path / "x.json"], capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "headscope.corpus_partial/1" in bad.stderr
