"""transformers' side of bench/run.py: the same model, the same token counts, all attentions
returned (output_attentions=True, eager attention, fp32, CPU), at the thread count given.
Prints one JSON line per T with the median and minimum time of `repeats` runs."""
import json
import sys
import time

import torch
import transformers

model_dir, threads, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lengths = [int(x) for x in sys.argv[4:]]
torch.set_num_threads(threads)
model = transformers.AutoModel.from_pretrained(model_dir, attn_implementation="eager").float().eval()
tok = transformers.AutoTokenizer.from_pretrained(model_dir)
text = ("Attention heads in a trained transformer specialise: some look at the previous word, others "
        "at the verb of a sentence, others at punctuation or at the first token. ") * 60
full = tok(text, truncation=True, max_length=512)["input_ids"]
for T in lengths:
    ids = torch.tensor([full[:T - 1] + [full[-1]]])
    with torch.inference_mode():
        model(ids, output_attentions=True, output_hidden_states=True)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(ids, output_attentions=True, output_hidden_states=True)
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    print(json.dumps({"T": T, "threads": threads, "median_ms": times[len(times) // 2], "min_ms": times[0]}), flush=True)
