"""Generates every golden file the C++ tests read, with Hugging Face transformers / tokenizers as
the oracle. Each tests/reference/golden_*.py module defines
    main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None
and writes under out_dir. A module is re-run only when its source changed (stamp per module)."""
import argparse
import hashlib
import importlib.util
import pathlib
import sys
import time

here = pathlib.Path(__file__).resolve().parent
ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True, type=pathlib.Path)
ap.add_argument("--out", required=True, type=pathlib.Path)
ap.add_argument("--force", action="store_true")
args = ap.parse_args()
args.out.mkdir(parents=True, exist_ok=True)

for path in sorted(here.glob("golden_*.py")):
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    stamp = args.out / f".{path.stem}.stamp"
    if not args.force and stamp.exists() and stamp.read_text() == digest:
        continue
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    t0 = time.time()
    print(f"goldens: {path.stem} ...", flush=True)
    module.main(args.model.resolve(), args.out.resolve())
    stamp.write_text(digest)
    print(f"goldens: {path.stem} done in {time.time() - t0:.1f}s", flush=True)
