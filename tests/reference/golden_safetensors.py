"""Golden for tests/unit/safetensors_test.cc: a few tensors of the default model as the
`safetensors` package reads them (shape, dtype, sampled values, sums), written to
<out>/safetensors_model.json. The C++ reader must agree value for value."""
import json
import pathlib

import numpy as np
from safetensors import safe_open

# A mix of 1-D/2-D tensors, first/last layers, and the one integer tensor of the checkpoint.
TENSORS = [
    "embeddings.word_embeddings.weight",
    "embeddings.position_ids",
    "embeddings.LayerNorm.bias",
    "encoder.layer.0.attention.self.query.weight",
    "encoder.layer.5.output.dense.weight",
    "pooler.dense.bias",
]


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    path = model_dir / "model.safetensors"
    rng = np.random.default_rng(0)
    records = []
    with safe_open(str(path), framework="np") as f:
        names = sorted(f.keys())
        for name in TENSORS:
            if name not in names:
                continue
            t = f.get_tensor(name)
            flat = t.reshape(-1)
            # first, last and a few random positions (flat row-major indices)
            idx = sorted({0, flat.size - 1, *rng.integers(0, flat.size, 6).tolist()})
            rec = {"name": name, "dtype": str(f.get_slice(name).get_dtype()), "shape": list(t.shape)}
            if np.issubdtype(t.dtype, np.floating):
                as64 = flat.astype(np.float64)
                rec["samples"] = [[int(i), float(flat[i])] for i in idx]
                rec["sum"] = float(as64.sum())
                rec["abs_sum"] = float(np.abs(as64).sum())
            else:
                rec["int_samples"] = [[int(i), int(flat[i])] for i in idx]
            records.append(rec)
    out = {"file": path.name, "n_tensors": len(names), "first_names": names[:3], "tensors": records}
    (out_dir / "safetensors_model.json").write_text(json.dumps(out, indent=1))
