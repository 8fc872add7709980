// GGUF reader: files written by gguf-py (tests/reference/golden_gguf.py) with metadata of every
// value type and tensors in every supported storage type, compared bit for bit against
// gguf.quants.dequantize (hand-packed blocks are in gguf_quants_test.cc); and one test per
// corruption, each a clean Error naming the file and the key/tensor.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <stdlib.h>
#include "test_support.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

namespace fs = std::filesystem;
using headscope::Error;
using headscope::Tensor;
using namespace headscope::io;

namespace {

using TempDir = headscope::testing::TempDir;
using headscope::testing::expect_error;
using headscope::testing::write_raw;

std::string read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// ---- the gguf-py goldens ----

struct Goldens {
  std::string dir;
  nlohmann::json manifest;
  std::vector<float> expected;
};

const Goldens& goldens() {
  static const Goldens g = [] {
    const char* env = std::getenv("HEADSCOPE_GOLDENS");
    if (env == nullptr || *env == '\0')
      throw std::runtime_error("HEADSCOPE_GOLDENS is not set; run the tests with `make test`");
    Goldens out;
    out.dir = std::string(env) + "/gguf";
    std::ifstream in(out.dir + "/manifest.json");
    if (!in) throw std::runtime_error("missing " + out.dir + "/manifest.json (run tests/reference/make_goldens.py)");
    out.manifest = nlohmann::json::parse(in);
    const std::string blob = read_raw(out.dir + "/expected.f32");
    out.expected.resize(blob.size() / 4);
    std::memcpy(out.expected.data(), blob.data(), out.expected.size() * 4);
    return out;
  }();
  return g;
}

const nlohmann::json& golden_file(const std::string& name) {
  for (const auto& f : goldens().manifest["files"])
    if (f["file"] == name) return f;
  throw std::runtime_error("manifest has no " + name);
}

TEST(GgufGolden, HeaderAndMetadataOfEveryType) {
  const auto& g = golden_file("types.gguf");
  const GgufFile f(goldens().dir + "/types.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), g["alignment"].get<uint64_t>());
  EXPECT_EQ(f.data_offset(), g["data_offset"].get<uint64_t>());
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.keys().front(), "general.architecture");

  for (const auto& m : g["metadata"]) {
    const std::string key = m["key"];
    SCOPED_TRACE(key);
    ASSERT_TRUE(f.has(key));
    const GgufValue& v = f.value(key);
    EXPECT_STREQ(gguf_type_name(v.type), m["type"].get<std::string>().c_str());
    const auto& want = m["value"];
    if (v.type == GgufType::STRING) {
      EXPECT_EQ(f.get_string(key), want.get<std::string>());
    } else if (v.type == GgufType::BOOL) {
      EXPECT_EQ(f.get_bool(key), want.get<bool>());
    } else if (v.type == GgufType::FLOAT32 || v.type == GgufType::FLOAT64) {
      EXPECT_EQ(f.get_float(key), want.get<double>());
    } else if (v.type == GgufType::ARRAY) {
      EXPECT_STREQ(gguf_type_name(v.elem_type), m["elem_type"].get<std::string>().c_str());
      EXPECT_EQ(v.count, want.size());
      switch (v.elem_type) {
        case GgufType::STRING:
          EXPECT_EQ(f.get_string_array(key), want.get<std::vector<std::string>>());
          break;
        case GgufType::FLOAT32:
        case GgufType::FLOAT64: {
          const auto got = f.get_float_array(key);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(want[i].get<double>())) << i;
          break;
        }
        case GgufType::BOOL: {
          const auto got = f.get_int_array(key);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i] != 0, want[i].get<bool>()) << i;
          break;
        }
        default:
          EXPECT_EQ(f.get_int_array(key), want.get<std::vector<int64_t>>());
      }
    } else if (key == "test.u64_big") {  // 2^63 + 5: stored, but not representable as int64
      EXPECT_EQ(v.u, want.get<uint64_t>());
      expect_error([&] { f.get_int(key); }, {"types.gguf", "'test.u64_big'", "does not fit in int64"});
      EXPECT_EQ(f.get_float(key), 9223372036854775813.0);
    } else {
      EXPECT_EQ(f.get_int(key), want.get<int64_t>());
      EXPECT_EQ(f.get_float(key), static_cast<double>(want.get<int64_t>()));
    }
  }
  // Type mismatches and absent keys name the key; fallbacks apply only to absent keys.
  expect_error([&] { f.get_int("test.string"); }, {"types.gguf", "'test.string'", "STRING", "expected an integer"});
  expect_error([&] { f.get_string_array("tokenizer.ggml.scores"); }, {"'tokenizer.ggml.scores'", "ARRAY of FLOAT32"});
  expect_error([&] { f.get_string("llama.block_count"); }, {"types.gguf", "no metadata key 'llama.block_count'"});
  EXPECT_EQ(f.get_int("llama.block_count", 12), 12);
  EXPECT_EQ(f.get_int("test.u16", 12), 60000);
  EXPECT_EQ(f.get_string("general.name", "unnamed"), "unnamed");
  EXPECT_TRUE(f.get_bool("test.bool_true", false));
  EXPECT_EQ(f.get_float("test.absent", 0.5), 0.5);
}

void check_golden_tensors(const std::string& file_name) {
  const auto& g = golden_file(file_name);
  const GgufFile f(goldens().dir + "/" + file_name);
  EXPECT_EQ(f.alignment(), g["alignment"].get<uint64_t>());
  EXPECT_EQ(f.data_offset(), g["data_offset"].get<uint64_t>());
  ASSERT_EQ(f.tensors().size(), g["tensors"].size());
  size_t i = 0;
  for (const auto& t : g["tensors"]) {
    const std::string name = t["name"];
    SCOPED_TRACE(file_name + ": " + name);
    EXPECT_EQ(f.tensor_names().at(i++), name);  // file order preserved
    const GgufTensorInfo& info = f.tensor(name);
    EXPECT_STREQ(ggml_type_name(info.type), t["type"].get<std::string>().c_str());
    EXPECT_EQ(info.ne, t["ne"].get<std::vector<int64_t>>());
    EXPECT_EQ(f.data_offset() + info.offset, t["data_offset"].get<uint64_t>());
    EXPECT_EQ(info.nbytes, t["nbytes"].get<size_t>());
    if (!t.contains("shape")) {
      EXPECT_FALSE(ggml_can_dequantize(info.type));
      expect_error([&] { f.to_f32(name); }, {file_name, "'" + name + "'", "cannot dequantize"});
      continue;
    }
    const auto shape = t["shape"].get<std::vector<int64_t>>();
    EXPECT_EQ(info.shape(), shape);
    const Tensor x = f.to_f32(name, shape);
    ASSERT_EQ(x.shape, shape);
    const size_t off = t["expected_offset"], count = t["expected_count"];
    ASSERT_EQ(static_cast<size_t>(x.numel()), count);
    size_t mismatches = 0;
    for (size_t k = 0; k < count; ++k) {
      const float want = goldens().expected.at(off + k);
      const bool same = std::isnan(want) ? std::isnan(x.data[k]) : bits_of(x.data[k]) == bits_of(want);
      if (!same && mismatches++ < 5) ADD_FAILURE() << "element " << k << ": got " << x.data[k] << ", want " << want;
    }
    EXPECT_EQ(mismatches, 0u);
  }
}

TEST(GgufGolden, EveryTensorTypeMatchesGgufPyBitForBit) { check_golden_tensors("types.gguf"); }

TEST(GgufGolden, CustomAlignment) {
  check_golden_tensors("aligned64.gguf");
  const GgufFile f(goldens().dir + "/aligned64.gguf");
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_int("general.alignment"), 64);
  EXPECT_EQ(f.tensor("b.q8_0").offset % 64, 0u);
  EXPECT_NE(f.tensor("b.q8_0").offset, 40u);  // padded after the 40-byte first tensor
}

TEST(GgufGolden, ShapeCheckAndMissingTensor) {
  const GgufFile f(goldens().dir + "/types.gguf");
  expect_error(
      [&] {
        f.to_f32("t.q4_k", {3, 2, 256});
      },
      {"types.gguf", "'t.q4_k'", "shape [2, 3, 256] (ggml ne [256, 3, 2]), expected [3, 2, 256]"});
  expect_error([&] { f.tensor("output.weight"); }, {"types.gguf", "no tensor 'output.weight'"});
}

// ---- hand-built files for the corruption cases ----

std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string str(const std::string& s) { return u64(s.size()) + s; }
std::string kv_u32(const std::string& k, uint32_t v) { return str(k) + u32(4) + u32(v); }
std::string kv_str(const std::string& k, const std::string& v) { return str(k) + u32(8) + str(v); }
std::string tinfo(const std::string& name, const std::vector<uint64_t>& ne, uint32_t type, uint64_t offset) {
  std::string s = str(name) + u32(static_cast<uint32_t>(ne.size()));
  for (uint64_t d : ne) s += u64(d);
  return s + u32(type) + u64(offset);
}

struct Spec {
  std::string magic = "GGUF";
  uint32_t version = 3;
  std::vector<std::string> kvs = {kv_str("general.architecture", "llama"), kv_u32("test.x", 7)};
  std::vector<std::string> infos;
  std::string data;
  uint64_t alignment = 32;
  std::optional<uint64_t> kv_count, tensor_count;
};

// A valid two-tensor payload: "w" F32 [2, 32] (256 bytes of 0..63 * 0.25) and "q" Q8_0 [32] at
// offset 256 (d = 1, qs = -16..15).
Spec valid_spec() {
  Spec s;
  s.infos = {tinfo("w", {32, 2}, 0, 0), tinfo("q", {32}, 8, 256)};
  for (int i = 0; i < 64; ++i) {
    const float v = i * 0.25f;
    s.data += std::string(reinterpret_cast<const char*>(&v), 4);
  }
  s.data += std::string("\x00\x3C", 2);
  for (int j = 0; j < 32; ++j) s.data += static_cast<char>(static_cast<int8_t>(j - 16));
  return s;
}

std::string build(const Spec& s) {
  std::string out =
      s.magic + u32(s.version) + u64(s.tensor_count.value_or(s.infos.size())) + u64(s.kv_count.value_or(s.kvs.size()));
  for (const auto& kv : s.kvs) out += kv;
  for (const auto& ti : s.infos) out += ti;
  out.resize((out.size() + s.alignment - 1) / s.alignment * s.alignment, '\0');
  return out + s.data;
}

TEST(GgufHandBuilt, ValidFileReads) {
  TempDir dir;
  write_raw(dir.file("ok.gguf"), build(valid_spec()));
  const GgufFile f(dir.file("ok.gguf"));
  EXPECT_EQ(f.get_int("test.x"), 7);
  const Tensor w = f.to_f32("w", {2, 32});
  for (int i = 0; i < 64; ++i) EXPECT_EQ(w.data[i], i * 0.25f);
  const Tensor q = f.to_f32("q");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{32}));
  for (int j = 0; j < 32; ++j) EXPECT_EQ(q.data[j], static_cast<float>(j - 16));
}

struct Case {
  const char* label;
  std::function<void(Spec&)> mutate;
  std::vector<std::string> expect;
};

TEST(GgufCorrupt, EachCaseIsAClearError) {
  const uint64_t huge = uint64_t{1} << 60;
  const std::vector<Case> cases = {
      {"bad magic", [](Spec& s) { s.magic = "GGML"; }, {"not a GGUF file"}},
      {"version 1", [](Spec& s) { s.version = 1; }, {"version 1 is obsolete"}},
      {"version 4", [](Spec& s) { s.version = 4; }, {"unsupported GGUF version 4"}},
      {"big endian", [](Spec& s) { s.version = 0x03000000; }, {"big-endian"}},
      {"kv count too big", [&](Spec& s) { s.kv_count = huge; }, {"metadata_kv_count", "cannot fit"}},
      {"tensor count too big", [&](Spec& s) { s.tensor_count = huge; }, {"tensor_count", "cannot fit"}},
      {"kv count past end", [](Spec& s) { s.kv_count = 3; }, {}},  // reads tensor infos as a key: any Error
      {"key length huge",
       [&](Spec& s) { s.kvs[1] = u64(huge) + "test.x" + u32(4) + u32(7); },
       {"truncated", "metadata key #1"}},
      {"string value length huge",
       [&](Spec& s) { s.kvs[0] = str("general.architecture") + u32(8) + u64(huge) + "llama"; },
       {"truncated", "'general.architecture'"}},
      {"unknown kv type",
       [](Spec& s) { s.kvs[1] = str("test.x") + u32(13) + u32(7); },
       {"'test.x'", "unknown value type 13"}},
      {"array count huge",
       [&](Spec& s) { s.kvs[1] = str("test.arr") + u32(9) + u32(5) + u64(huge) + u32(1); },
       {"'test.arr'", "claims", "INT32 elements"}},
      {"string array count huge",
       [&](Spec& s) { s.kvs[1] = str("tokenizer.ggml.tokens") + u32(9) + u32(8) + u64(huge); },
       {"'tokenizer.ggml.tokens'", "claims", "strings"}},
      {"string array element too long",
       [&](Spec& s) {
         s.kvs[1] = str("tokenizer.ggml.tokens") + u32(9) + u32(8) + u64(2) + str("a") + u64(huge) + "b";
       },
       {"'tokenizer.ggml.tokens'", "element 1", "truncated"}},
      {"nested array",
       [](Spec& s) { s.kvs[1] = str("test.nested") + u32(9) + u32(9) + u64(1) + u32(4) + u64(1) + u32(3); },
       {"'test.nested'", "array of arrays"}},
      {"duplicate key", [](Spec& s) { s.kvs.push_back(kv_u32("test.x", 8)); }, {"duplicate metadata 'test.x'"}},
      {"alignment not power of two",
       [](Spec& s) { s.kvs.push_back(kv_u32("general.alignment", 48)); },
       {"'general.alignment'", "48", "power of two"}},
      {"alignment zero",
       [](Spec& s) { s.kvs.push_back(kv_u32("general.alignment", 0)); },
       {"'general.alignment'", "power of two"}},
      {"alignment string",
       [](Spec& s) { s.kvs.push_back(kv_str("general.alignment", "32")); },
       {"'general.alignment'", "unsigned integer", "STRING"}},
      {"too many dims",
       [](Spec& s) {
         s.infos[0] = tinfo("w", {32, 2, 1, 1, 1}, 0, 0);
       },
       {"tensor 'w'", "5 dimensions"}},
      {"dim beyond int64",
       [](Spec& s) {
         s.infos[0] = tinfo("w", {32, uint64_t{1} << 63}, 0, 0);
       },
       {"tensor 'w'", "corrupt"}},
      {"dims overflow",
       [](Spec& s) {
         s.infos[0] = tinfo("w", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0);
       },
       {"tensor 'w'", "overflow"}},
      {"byte count overflow",
       [](Spec& s) { s.infos[0] = tinfo("w", {uint64_t{1} << 62}, 0, 0); },
       {"tensor 'w'", "overflow"}},
      {"unknown ggml type",
       [](Spec& s) {
         s.infos[0] = tinfo("w", {32, 2}, 99, 0);
       },
       {"tensor 'w'", "unknown ggml type 99"}},
      {"retired ggml type",
       [](Spec& s) {
         s.infos[0] = tinfo("w", {32, 2}, 4, 0);
       },
       {"tensor 'w'", "unknown ggml type 4"}},
      {"row not whole blocks",
       [](Spec& s) { s.infos[1] = tinfo("q", {33}, 2, 256); },
       {"tensor 'q'", "ne[0] = 33", "Q4_0 block size 32"}},
      {"misaligned offset",
       [](Spec& s) { s.infos[1] = tinfo("q", {32}, 8, 260); },
       {"tensor 'q'", "offset 260", "alignment 32"}},
      {"offset out of range",
       [](Spec& s) { s.infos[1] = tinfo("q", {32}, 8, 1 << 20); },
       {"tensor 'q'", "past the end of the data section"}},
      {"offset near 2^64",
       [](Spec& s) { s.infos[1] = tinfo("q", {32}, 8, ~uint64_t{31}); },
       {"tensor 'q'", "past the end"}},
      {"overlap", [](Spec& s) { s.infos[1] = tinfo("q", {32}, 8, 224); }, {"tensor 'q'", "overlaps tensor 'w'"}},
      {"duplicate tensor",
       [](Spec& s) { s.infos[1] = tinfo("w", {32}, 8, 256); },
       {"tensor 'w'", "duplicate tensor name"}},
      {"data truncated", [](Spec& s) { s.data.resize(200); }, {"tensor", "past the end", "truncated"}},
      // A type changed to a smaller one (F32 -> F16; Q8_0 -> Q4_0 on the last tensor) or a shrunk
      // dimension leaves bytes that no tensor owns: the data would be dequantized as garbage.
      {"type made smaller",
       [](Spec& s) {
         s.infos[0] = tinfo("w", {32, 2}, 1, 0);
       },
       {"tensor 'w'", "F16", "128 bytes", "tensor 'q' is 256 bytes after its start"}},
      {"last type made smaller",
       [](Spec& s) { s.infos[1] = tinfo("q", {32}, 2, 256); },
       {"tensor 'q'", "Q4_0", "18 bytes", "the end of the file is 34 bytes after"}},
      {"dimension made smaller",
       [](Spec& s) {
         s.infos[0] = tinfo("w", {32, 1}, 0, 0);
       },
       {"tensor 'w'", "128 bytes"}},
      {"trailing bytes", [](Spec& s) { s.data += std::string(64, '\0'); }, {"tensor 'q'", "the end of the file"}},
  };
  TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    Spec s = valid_spec();
    c.mutate(s);
    const std::string path = dir.file(std::string("bad_") + std::to_string(&c - cases.data()) + ".gguf");
    write_raw(path, build(s));
    std::vector<std::string> expect = c.expect;
    expect.push_back(path);
    expect_error([&] { GgufFile f(path); }, expect);
  }
}

TEST(GgufHandBuilt, PaddingAfterEachTensorIsAccepted) {
  // As gguf-py writes it: the last tensor padded to the alignment too.
  Spec s = valid_spec();
  s.data.resize(320, '\0');
  TempDir dir;
  write_raw(dir.file("padded.gguf"), build(s));
  const GgufFile f(dir.file("padded.gguf"));
  EXPECT_EQ(f.to_f32("q").data[31], 15.0f);
}

TEST(GgufCorrupt, TinyAndMissingFiles) {
  TempDir dir;
  write_raw(dir.file("two.gguf"), "GG");
  expect_error([&] { GgufFile f(dir.file("two.gguf")); }, {"two.gguf", "not a GGUF file"});
  write_raw(dir.file("empty.gguf"), "");
  expect_error([&] { GgufFile f(dir.file("empty.gguf")); }, {"empty.gguf", "not a GGUF file"});
  expect_error([&] { GgufFile f(dir.file("absent.gguf")); }, {"absent.gguf", "cannot open"});
}

TEST(GgufCorrupt, EveryTruncationIsAnError) {
  const std::string full = build(valid_spec());
  TempDir dir;
  const std::string path = dir.file("cut.gguf");
  for (size_t cut = 0; cut < full.size(); ++cut) {
    write_raw(path, full.substr(0, cut));
    EXPECT_THROW(GgufFile f(path), Error) << "cut at " << cut;
  }
}

TEST(GgufCorrupt, RandomByteFlipsNeverCrash) {
  // Mutations of a real gguf-py file: opening either succeeds (then every tensor converts) or
  // throws headscope::Error; nothing else (no bad_alloc, no out-of-range read).
  const std::string original = read_raw(goldens().dir + "/types.gguf");
  ASSERT_FALSE(original.empty());
  std::mt19937 rng(42);
  TempDir dir;
  const std::string path = dir.file("fuzz.gguf");
  int opened = 0, rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    // Aim most flips at the header and tensor infos, where parsing happens.
    const size_t header_end = golden_file("types.gguf")["data_offset"].get<size_t>();
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % 4 ? rng() % std::min(header_end, bytes.size()) : rng() % bytes.size();
      bytes[at] = static_cast<char>(rng() & 0xFF);
    }
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    write_raw(path, bytes);
    try {
      const GgufFile f(path);
      for (const auto& [name, info] : f.tensors())
        if (ggml_can_dequantize(info.type)) (void)f.to_f32(name);
      ++opened;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(opened, 0);  // flips inside tensor data leave a readable file
}

}  // namespace
