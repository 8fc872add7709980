"""Goldens for tests/unit/gguf_test.cc, written with the `gguf` package (gguf-py, the writer and
reader llama.cpp ships). Under <out>/gguf/:

  types.gguf      metadata of every value type (scalars, strings, arrays of each element type)
                  and tensors in F32 F16 BF16 F64 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K..Q6_K, plus an I32
                  tensor (stored, not dequantizable)
  aligned64.gguf  general.alignment = 64, a few tensors
  manifest.json   per file: data_offset, alignment, expected metadata, and for each tensor its
                  ggml type, ne, row-major shape, absolute data offset, and where its expected fp32
                  values sit in expected.f32
  expected.f32    the expected values, little-endian fp32, from gguf.quants.dequantize

Classic formats are quantized from random floats by gguf.quants.quantize; K-quants (which gguf-py
cannot quantize) are random blocks with sane f16 scales, so every bit of the layout is exercised.
"""
import json
import math
import pathlib

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V

SEED = 1234

# Byte offsets of the f16 super-block scale(s) inside one block (ggml-common.h).
K_SCALE_FIELDS = {
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}


def random_k_blocks(rng, qtype, shape):
    """Random bytes in the block layout of `qtype` for a float tensor of `shape`, with each
    f16 scale replaced by a finite value in [1e-3, 0.1) so the result has no inf/NaN."""
    block, tsize = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = int(np.prod(shape)) // block
    raw = rng.integers(0, 256, size=(n_blocks, tsize), dtype=np.uint8)
    for off in K_SCALE_FIELDS[qtype]:
        scales = rng.uniform(1e-3, 0.1, size=n_blocks).astype(np.float16)
        raw[:, off:off + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(*shape[:-1], shape[-1] // block * tsize)


def metadata_cases():
    """(key, GGUFValueType, value, sub_type, expected JSON value). Float32 values are recorded as
    the float32 actually stored, so the C++ comparison is exact."""
    f32 = lambda x: float(np.float32(x))
    return [
        ("test.u8", V.UINT8, 200, None, 200),
        ("test.i8", V.INT8, -100, None, -100),
        ("test.u16", V.UINT16, 60000, None, 60000),
        ("test.i16", V.INT16, -30000, None, -30000),
        ("test.u32", V.UINT32, 4_000_000_000, None, 4_000_000_000),
        ("test.i32", V.INT32, -2_000_000_000, None, -2_000_000_000),
        ("test.f32", V.FLOAT32, 0.1, None, f32(0.1)),
        ("test.bool_true", V.BOOL, True, None, True),
        ("test.bool_false", V.BOOL, False, None, False),
        ("test.string", V.STRING, "h\u00e9llo \u2713 world", None, "h\u00e9llo \u2713 world"),
        ("test.u64_big", V.UINT64, 2**63 + 5, None, 2**63 + 5),
        ("test.i64", V.INT64, -(2**62) - 7, None, -(2**62) - 7),
        ("test.f64", V.FLOAT64, math.pi, None, math.pi),
        ("tokenizer.ggml.tokens", V.ARRAY, ["<s>", "</s>", "", "\u0120the", "\u2581hello", "a b"], V.STRING,
         ["<s>", "</s>", "", "\u0120the", "\u2581hello", "a b"]),
        ("tokenizer.ggml.merges", V.ARRAY, ["\u0120 t", "h e"], V.STRING, ["\u0120 t", "h e"]),
        ("tokenizer.ggml.token_type", V.ARRAY, [3, 3, 1, 1, 1, 6], V.INT32, [3, 3, 1, 1, 1, 6]),
        ("tokenizer.ggml.scores", V.ARRAY, [0.0, -1.5, -2.25, 0.1, -1e-3, 7.0], V.FLOAT32,
         [f32(x) for x in [0.0, -1.5, -2.25, 0.1, -1e-3, 7.0]]),
        ("test.arr_u8", V.ARRAY, [0, 255, 7], V.UINT8, [0, 255, 7]),
        ("test.arr_i8", V.ARRAY, [-128, 127], V.INT8, [-128, 127]),
        ("test.arr_u16", V.ARRAY, [65535, 1], V.UINT16, [65535, 1]),
        ("test.arr_i16", V.ARRAY, [-32768, 5], V.INT16, [-32768, 5]),
        ("test.arr_u32", V.ARRAY, [4_294_967_295], V.UINT32, [4_294_967_295]),
        ("test.arr_i64", V.ARRAY, [-(2**63), 2**63 - 1], V.INT64, [-(2**63), 2**63 - 1]),
        ("test.arr_u64", V.ARRAY, [2**40, 3], V.UINT64, [2**40, 3]),
        ("test.arr_bool", V.ARRAY, [True, False, True], V.BOOL, [True, False, True]),
        ("test.arr_f64", V.ARRAY, [math.e, -0.5], V.FLOAT64, [math.e, -0.5]),
    ]


def tensor_cases(rng):
    """(name, stored array, raw_dtype or None, ggml type, expected fp32 array in row-major shape)."""
    cases = []
    x = rng.standard_normal((3, 64)).astype(np.float32)
    cases.append(("t.f32", x, None, T.F32, x))

    h = rng.standard_normal((2, 40)).astype(np.float16)
    h.flat[:8] = np.array([np.inf, -np.inf, 1e-7, 6.1e-5, 65504, -0.0, 0.33325, -2.0], dtype=np.float16)
    cases.append(("t.f16", h, None, T.F16, h.astype(np.float32)))

    b = rng.standard_normal((4, 24)).astype(np.float32)
    bq = gguf.quants.quantize(b, T.BF16)
    cases.append(("t.bf16", bq, T.BF16, T.BF16, gguf.quants.dequantize(bq, T.BF16)))

    d = rng.standard_normal((5, 3)) * 1e3
    d.flat[0] = 1e-40  # becomes an fp32 subnormal
    cases.append(("t.f64", d, None, T.F64, d.astype(np.float32)))

    for qtype, shape in [(T.Q8_0, (4, 64)), (T.Q4_0, (3, 96)), (T.Q4_1, (2, 128)), (T.Q5_0, (2, 64)),
                         (T.Q5_1, (3, 2, 64))]:
        src = rng.standard_normal(shape).astype(np.float32) * rng.uniform(0.1, 3.0)
        q = gguf.quants.quantize(src, qtype)
        cases.append((f"t.{qtype.name.lower()}", q, qtype, qtype, gguf.quants.dequantize(q, qtype)))

    for qtype, shape in [(T.Q2_K, (2, 512)), (T.Q3_K, (2, 512)), (T.Q4_K, (2, 3, 256)), (T.Q5_K, (3, 256)),
                         (T.Q6_K, (2, 512))]:
        q = random_k_blocks(rng, qtype, shape)
        cases.append((f"t.{qtype.name.lower()}", q, qtype, qtype, gguf.quants.dequantize(q, qtype)))

    ints = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    cases.append(("t.i32", ints, None, T.I32, None))
    return cases


def write_file(path, cases, metadata, alignment=None):
    w = gguf.GGUFWriter(str(path), arch="llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, vtype, value, sub, _ in metadata:
        w.add_key_value(key, value, vtype, sub_type=sub)
    for name, arr, raw_dtype, _, _ in cases:
        w.add_tensor(name, arr, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def describe(path, cases, metadata, blob):
    reader = gguf.GGUFReader(str(path))
    by_name = {t.name: t for t in reader.tensors}
    tensors = []
    for name, _, _, qtype, expected in cases:
        rt = by_name[name]
        rec = {"name": name, "type": qtype.name, "ne": [int(n) for n in rt.shape],
               "data_offset": int(rt.data_offset), "nbytes": int(rt.n_bytes)}
        if expected is not None:
            expected = np.ascontiguousarray(expected, dtype=np.float32)
            rec["shape"] = list(expected.shape)
            rec["expected_offset"] = sum(len(b) for b in blob) // 4
            rec["expected_count"] = int(expected.size)
            blob.append(expected.astype("<f4").tobytes())
        tensors.append(rec)
    return {
        "file": path.name,
        "data_offset": int(reader.data_offset),
        "alignment": int(reader.alignment),
        "metadata": [{"key": k, "type": v.name, "elem_type": s.name if s is not None else None, "value": e}
                     for k, v, _, s, e in metadata],
        "tensors": tensors,
    }


def main(model_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    rng = np.random.default_rng(SEED)
    gdir = out_dir / "gguf"
    gdir.mkdir(parents=True, exist_ok=True)
    blob = []
    files = []

    meta = metadata_cases()
    cases = tensor_cases(rng)
    write_file(gdir / "types.gguf", cases, meta)
    files.append(describe(gdir / "types.gguf", cases, meta, blob))

    small_meta = [("test.note", V.STRING, "aligned to 64", None, "aligned to 64")]
    x = rng.standard_normal((2, 5)).astype(np.float32)  # 40 bytes: the next tensor needs padding
    q = gguf.quants.quantize(rng.standard_normal((1, 64)).astype(np.float32), T.Q8_0)
    small = [("a.f32", x, None, T.F32, x), ("b.q8_0", q, T.Q8_0, T.Q8_0, gguf.quants.dequantize(q, T.Q8_0))]
    write_file(gdir / "aligned64.gguf", small, small_meta, alignment=64)
    files.append(describe(gdir / "aligned64.gguf", small, small_meta, blob))

    (gdir / "expected.f32").write_bytes(b"".join(blob))
    (gdir / "manifest.json").write_text(json.dumps({"files": files}, indent=1))
