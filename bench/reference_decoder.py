"""transformers' side of bench/decoder_bench.py: the same causal model (a GGUF file, dequantized to
fp32 by transformers, or a Hugging Face folder), eager attention, CPU, all attentions returned.
For each thread count and T prints one JSON line: the median time of a full forward pass with
output_attentions and output_hidden_states, and of one generation step through the KV cache after
T tokens with output_attentions."""
import json
import pathlib
import sys
import time

import torch
import transformers

path, repeats = pathlib.Path(sys.argv[1]), int(sys.argv[2])
threads = [int(x) for x in sys.argv[3].split(",")]
lengths = [int(x) for x in sys.argv[4:]]
if path.is_dir() and not (path / "config.json").exists():
    path = sorted(path.glob("*.gguf"))[0]
kwargs = dict(dtype=torch.float32, attn_implementation="eager")
if path.suffix == ".gguf":
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, **kwargs)
    tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
else:
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), **kwargs)
    tok = transformers.AutoTokenizer.from_pretrained(str(path))
model.eval()
text = ("Attention heads in a trained transformer specialise: some look at the previous word, others "
        "at the verb of a sentence, others at punctuation or at the first token. ") * 80
all_ids = tok(text)["input_ids"]


def median_ms(f):
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append((time.perf_counter() - t0) * 1000)
    return sorted(times)[len(times) // 2]


for t in threads:
    torch.set_num_threads(t)
    for T in lengths:
        ids = torch.tensor([all_ids[:T]])
        with torch.inference_mode():
            full = median_ms(lambda: model(ids, output_attentions=True, output_hidden_states=True, use_cache=False))
            past = model(ids, use_cache=True).past_key_values
            steps = []
            for r in range(repeats + 1):
                t0 = time.perf_counter()
                out = model(torch.tensor([[all_ids[r]]]), past_key_values=past, use_cache=True, output_attentions=True)
                past = out.past_key_values
                if r:
                    steps.append((time.perf_counter() - t0) * 1000)
        print(json.dumps({"T": T, "threads": t, "all_ms": full, "step_ms": sorted(steps)[len(steps) // 2]}), flush=True)
