"""Prints the directory, inside an installed Python package, that holds a Hugging Face model
(the folder with config.json and a *.safetensors file). Used by scripts/setup.sh."""
import importlib.util
import pathlib
import sys

name = sys.argv[1]
spec = importlib.util.find_spec(name)
if spec is None or not spec.submodule_search_locations:
    sys.exit(f"find_model_package: package {name} is not installed in this environment")
root = pathlib.Path(list(spec.submodule_search_locations)[0])
for config in sorted(root.rglob("config.json")):
    if any(config.parent.glob("*.safetensors")):
        print(config.parent)
        sys.exit(0)
sys.exit(f"find_model_package: no config.json beside a .safetensors file under {root}")
