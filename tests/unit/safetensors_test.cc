// safetensors reader: hand-built files with known bit patterns in every float dtype, a sharded
// directory, one test per corruption (the error must name the file and the tensor), and the real
// default model against tests/reference/golden_safetensors.py (the `safetensors` package).
#include "io/safetensors.h"

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
#include <random>

#include "io/float_bits.h"

namespace fs = std::filesystem;
using headscope::Error;
using headscope::Tensor;
using namespace headscope::io;

namespace {

using TempDir = headscope::testing::TempDir;
using headscope::testing::expect_error;
using headscope::testing::write_raw;

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Writes [u64 header length][header][data] exactly as given (no validation: tests corrupt it).
void write_safetensors(const std::string& path, const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string content(reinterpret_cast<const char*>(&n), 8);
  write_raw(path, content + header + data);
}

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// Runs fn, expects headscope::Error whose message contains every one of `parts`.
// ---- dtype conversion: hand-picked bit patterns with independently known fp32 results ----

TEST(SafetensorsConvert, F16BitPatterns) {
  // (binary16 bits, expected fp32 bits). 14 values so both the 8-wide vector path and the
  // scalar tail run.
  const std::vector<std::pair<uint16_t, uint32_t>> cases = {
      {0x0000, 0x00000000},  // +0
      {0x8000, 0x80000000},  // -0
      {0x3C00, 0x3F800000},  // 1
      {0xC000, 0xC0000000},  // -2
      {0x7BFF, 0x477FE000},  // 65504, largest finite half
      {0x0001, 0x33800000},  // 2^-24, smallest subnormal
      {0x03FF, 0x387FC000},  // 1023 * 2^-24, largest subnormal
      {0x0400, 0x38800000},  // 2^-14, smallest normal
      {0x8001, 0xB3800000},  // -2^-24
      {0x7C00, 0x7F800000},  // +inf
      {0xFC00, 0xFF800000},  // -inf
      {0x3555, 0x3EAAA000},  // 0.333251953125
      {0x0200, 0x38000000},  // 2^-15, a subnormal with a single bit
      {0xB800, 0xBF000000},  // -0.5
  };
  std::vector<uint16_t> halves;
  for (auto [h, _] : cases) halves.push_back(h);
  halves.push_back(0x7E00);  // quiet NaN
  halves.push_back(0xFC01);  // signalling NaN, negative

  TempDir dir;
  const std::string header = R"({"h":{"dtype":"F16","shape":[2,8],"data_offsets":[0,32]}})";
  write_safetensors(dir.file("f16.safetensors"), header, bytes_of(halves));
  SafetensorsFile f(dir.file("f16.safetensors"));
  const Tensor t = to_f32(f.tensors().at("h"));
  ASSERT_EQ(t.shape, (std::vector<int64_t>{2, 8}));
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(bits_of(t.data[i]), cases[i].second) << "half 0x" << std::hex << cases[i].first;
  EXPECT_TRUE(std::isnan(t.data[14]));
  EXPECT_TRUE(std::isnan(t.data[15]));
  EXPECT_TRUE(std::signbit(t.data[15]));
}

TEST(SafetensorsConvert, F16AllValuesMatchFormula) {
  // Every one of the 65536 halves through the bulk converter (vector path) against the
  // definition: (-1)^s * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024 for e == 0.
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> out(all.size());
  f16_to_f32_row(reinterpret_cast<const uint8_t*>(all.data()), out.data(), all.size());
  for (uint32_t h = 0; h < 65536; ++h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    const float got = out[h];
    if (e == 31) {
      if (m == 0)
        EXPECT_TRUE(std::isinf(got) && std::signbit(got) == (s == 1)) << h;
      else
        EXPECT_TRUE(std::isnan(got)) << h;
      EXPECT_TRUE(std::isnan(f16_bits_to_f32(static_cast<uint16_t>(h))) == std::isnan(got)) << h;
      continue;
    }
    const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    const float want = static_cast<float>(s ? -mag : mag);
    ASSERT_EQ(bits_of(got), bits_of(want)) << "half 0x" << std::hex << h;
    ASSERT_EQ(bits_of(f16_bits_to_f32(static_cast<uint16_t>(h))), bits_of(want)) << "scalar, half 0x" << std::hex << h;
  }
}

TEST(SafetensorsConvert, BF16BitPatterns) {
  const std::vector<std::pair<uint16_t, uint32_t>> cases = {
      {0x3F80, 0x3F800000},  // 1
      {0xC049, 0xC0490000},  // -3.140625
      {0x0001, 0x00010000},  // fp32 subnormal 2^-133
      {0x8000, 0x80000000},  // -0
      {0x7F80, 0x7F800000},  // +inf
      {0xFF80, 0xFF800000},  // -inf
      {0x7F7F, 0x7F7F0000},  // largest finite bf16
  };
  std::vector<uint16_t> raw;
  for (auto [b, _] : cases) raw.push_back(b);
  raw.push_back(0x7FC0);  // NaN
  TempDir dir;
  write_safetensors(dir.file("b.safetensors"), R"({"b":{"dtype":"BF16","shape":[8],"data_offsets":[0,16]}})",
                    bytes_of(raw));
  const Tensor t = to_f32(SafetensorsFile(dir.file("b.safetensors")).tensors().at("b"));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(bits_of(t.data[i]), cases[i].second) << i;
  EXPECT_TRUE(std::isnan(t.data[7]));
}

TEST(SafetensorsConvert, F64RoundsToNearestFloat) {
  const std::vector<double> in = {
      1.0 / 3.0, 1e-40, 1e300, -1e300, -0.0, std::ldexp(1.0, -149), std::ldexp(1.0, -150), 0.1, std::nan("")};
  const std::vector<uint32_t> want = {
      0x3EAAAAAB,  // 1/3 rounded up
      0x000116C2,  // 1e-40 = 71362.38 * 2^-149 -> subnormal 71362
      0x7F800000,  // overflow -> +inf
      0xFF800000,  // -inf
      0x80000000,  // -0
      0x00000001,  // smallest subnormal, exact
      0x00000000,  // exactly half the smallest subnormal: ties to even -> 0
      0x3DCCCCCD,  // 0.1
  };
  TempDir dir;
  write_safetensors(dir.file("d.safetensors"), R"({"d":{"dtype":"F64","shape":[3,3],"data_offsets":[0,72]}})",
                    bytes_of(in));
  const Tensor t = to_f32(SafetensorsFile(dir.file("d.safetensors")).tensors().at("d"));
  ASSERT_EQ(t.shape, (std::vector<int64_t>{3, 3}));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(bits_of(t.data[i]), want[i]) << i;
  EXPECT_TRUE(std::isnan(t.data[8]));
}

TEST(SafetensorsConvert, F32IsBitExactAndNonFloatThrows) {
  const std::vector<uint32_t> in = {0x3FC00000, 0x80000000, 0x00000001, 0x7F800000, 0x7FC00001, 0xC2F6E979};
  const std::vector<int64_t> ids = {7, -3};
  TempDir dir;
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[24,40]},"empty":{"dtype":"F32","shape":[0,4],"data_offsets":[40,40]}})";
  write_safetensors(dir.file("m.safetensors"), header, bytes_of(in) + bytes_of(ids));
  SafetensorsFile f(dir.file("m.safetensors"));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_EQ(f.tensors().size(), 3u);
  const Tensor w = to_f32(f.tensors().at("w"));
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(bits_of(w.data[i]), in[i]) << i;
  const RawTensor& r = f.tensors().at("ids");
  EXPECT_EQ(r.dtype, DType::I64);
  int64_t second;
  std::memcpy(&second, r.data + 8, 8);
  EXPECT_EQ(second, -3);
  const Tensor e = to_f32(f.tensors().at("empty"));
  EXPECT_EQ(e.shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(e.numel(), 0);
  expect_error([&] { to_f32(r); }, {dir.file("m.safetensors"), "'ids'", "I64", "not a floating-point"});
}

// ---- directories: single file, sharded, PyTorch-only ----

TEST(SafetensorsDir, SingleFileStoreGetAndShapeCheck) {
  TempDir dir;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  write_safetensors(dir.file("model.safetensors"),
                    R"({"enc.layer.0.w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", bytes_of(a));
  const WeightStore ws = WeightStore::open_dir(dir.path().string());
  EXPECT_TRUE(ws.has("enc.layer.0.w"));
  EXPECT_FALSE(ws.has("enc.layer.1.w"));
  EXPECT_EQ(ws.names(), (std::vector<std::string>{"enc.layer.0.w"}));
  const Tensor t = ws.get("enc.layer.0.w", {2, 3});
  EXPECT_EQ(t.values(), a);
  expect_error(
      [&] {
        ws.get("enc.layer.0.w", {3, 2});
      },
      {dir.file("model.safetensors"), "'enc.layer.0.w'", "stored shape [2, 3], expected [3, 2]"});
  expect_error([&] { ws.raw("enc.layer.1.w"); },
               {dir.path().string(), "no tensor 'enc.layer.1.w'", "closest: 'enc.layer.0.w'"});
  // The file path itself works too.
  EXPECT_TRUE(WeightStore::open_dir(dir.file("model.safetensors")).has("enc.layer.0.w"));
}

void write_sharded(const TempDir& dir, const std::string& index_json) {
  const std::vector<float> a = {1.5f, -2.5f}, b = {0.25f, 0.5f, 0.75f};
  write_safetensors(dir.file("model-00001-of-00002.safetensors"),
                    R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", bytes_of(a));
  std::vector<uint16_t> b16 = {0x3400, 0x3800, 0x3A00};  // 0.25, 0.5, 0.75 in binary16
  write_safetensors(dir.file("model-00002-of-00002.safetensors"),
                    R"({"b":{"dtype":"F16","shape":[1,3],"data_offsets":[0,6]}})", bytes_of(b16));
  write_raw(dir.file("model.safetensors.index.json"), index_json);
}

TEST(SafetensorsDir, ShardedIndex) {
  TempDir dir;
  write_sharded(dir, R"({"metadata":{"total_size":14},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
                     R"("b":"model-00002-of-00002.safetensors"}})");
  const WeightStore ws = WeightStore::open_dir(dir.path().string());
  EXPECT_EQ(ws.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ws.get("a").values(), (std::vector<float>{1.5f, -2.5f}));
  const Tensor b = ws.get("b", {1, 3});
  EXPECT_EQ(b.values(), (std::vector<float>{0.25f, 0.5f, 0.75f}));
  EXPECT_NE(ws.raw("b").file.find("model-00002-of-00002.safetensors"), std::string::npos);
}

TEST(SafetensorsDir, ShardedIndexErrors) {
  {
    TempDir dir;  // the index promises a tensor its shard does not have
    write_sharded(dir,
                  R"({"weight_map":{"a":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})");
    expect_error(
        [&] { WeightStore::open_dir(dir.path().string()); },
        {"model.safetensors.index.json", "tensor 'c'", "model-00002-of-00002.safetensors", "does not contain it"});
  }
  {
    TempDir dir;  // a shard file is missing
    write_sharded(dir,
                  R"({"weight_map":{"a":"model-00001-of-00002.safetensors","z":"model-00009-of-00009.safetensors"}})");
    expect_error([&] { WeightStore::open_dir(dir.path().string()); },
                 {"model.safetensors.index.json", "tensor 'z'", "model-00009-of-00009.safetensors", "missing"});
  }
  {
    TempDir dir;  // shard names may not leave the directory
    write_sharded(dir, R"({"weight_map":{"a":"../elsewhere.safetensors"}})");
    expect_error([&] { WeightStore::open_dir(dir.path().string()); }, {"tensor 'a'", "invalid shard name"});
  }
  {
    TempDir dir;
    write_sharded(dir, R"({"weights":{}})");
    expect_error([&] { WeightStore::open_dir(dir.path().string()); }, {"model.safetensors.index.json", "weight_map"});
  }
}

TEST(SafetensorsDir, PytorchOnlyDirectoryExplainsConversion) {
  TempDir dir;
  write_raw(dir.file("pytorch_model.bin"), "not really a pickle");
  write_raw(dir.file("config.json"), "{}");
  expect_error(
      [&] { WeightStore::open_dir(dir.path().string()); },
      {dir.path().string(), "pytorch_model.bin", "safetensors", "torch.load", "save_file", "safe_serialization=True"});
  TempDir dir2;
  write_raw(dir2.file("weights.pt"), "x");
  expect_error([&] { WeightStore::open_dir(dir2.path().string()); }, {"weights.pt", "model.safetensors"});
}

TEST(SafetensorsDir, MissingOrEmpty) {
  TempDir dir;
  expect_error([&] { WeightStore::open_dir(dir.path().string()); }, {dir.path().string(), "no model weights found"});
  expect_error([&] { WeightStore::open_dir(dir.file("nope")); }, {"nope", "no such file"});
}

// ---- corruption: every case is a clean Error naming the file (and the tensor when there is one) ----

struct Corrupt {
  const char* label;
  std::string header;
  size_t data_bytes;
  std::vector<std::string> expect;
};

// Each case written as a file with that header and data; opening it must fail with an Error
// naming the path and every expected phrase.
void expect_each_refused(const std::vector<Corrupt>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    TempDir dir;
    const std::string path = dir.file("bad.safetensors");
    write_safetensors(path, c.header, std::string(c.data_bytes, '\0'));
    std::vector<std::string> expect = c.expect;
    expect.push_back(path);
    expect_error([&] { SafetensorsFile f(path); }, expect);
  }
}

TEST(SafetensorsCorrupt, HeaderCases) {
  const std::vector<Corrupt> cases = {
      {"not json", "{\"w\": [1, 2", 0, {"not valid JSON"}},
      {"array header", "[1, 2]", 0, {"does not start with '{'"}},
      {"string header", "\"{}\"", 0, {"does not start with '{'"}},
      {"unknown dtype",
       R"({"w":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})",
       4,
       {"'w'", "unknown dtype \"F12\""}},
      {"size mismatch",
       R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
       24,
       {"'w'", "[2, 3]", "needs 24 bytes", "span 20"}},
      {"overflow",
       R"({"w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})",
       8,
       {"'w'", "overflows"}},
      {"product overflow to small",
       R"({"w":{"dtype":"F16","shape":[9223372036854775807,2],"data_offsets":[0,4]}})",
       4,
       {"'w'", "overflows"}},
      {"past end",
       R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
       16,
       {"'w'", "past the end", "16 bytes"}},
      {"begin after end", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 16, {"'w'", "begin after end"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       16,
       {"'b'", "overlaps tensor 'a'"}},
      {"overlap, b first in offset order",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},"b":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})",
       12,
       {"overlaps tensor 'b'"}},
      {"negative dim",
       R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
       4,
       {"'w'", "shape", "non-negative"}},
      {"missing offsets", R"({"w":{"dtype":"F32","shape":[1]}})", 4, {"'w'", "missing \"data_offsets\""}},
      {"three offsets", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 8, {"'w'", "[begin, end]"}},
      {"entry not object", R"({"w":3})", 0, {"'w'", "must be an object"}},
      {"metadata value", R"({"__metadata__":{"format":1}})", 0, {"__metadata__", "'format'", "string"}},
  };
  expect_each_refused(cases);
}

TEST(SafetensorsCorrupt, FileLevelCases) {
  TempDir dir;
  write_raw(dir.file("tiny.safetensors"), "abc");
  expect_error([&] { SafetensorsFile f(dir.file("tiny.safetensors")); },
               {"tiny.safetensors", "not a safetensors file"});
  write_raw(dir.file("empty.safetensors"), "");
  expect_error([&] { SafetensorsFile f(dir.file("empty.safetensors")); },
               {"empty.safetensors", "not a safetensors file"});

  // Header length bigger than the file: what a truncated download looks like.
  const std::string header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  uint64_t n = 1000;
  write_raw(dir.file("trunc.safetensors"), std::string(reinterpret_cast<const char*>(&n), 8) + header);
  expect_error([&] { SafetensorsFile f(dir.file("trunc.safetensors")); },
               {"trunc.safetensors", "header length 1000 exceeds"});

  // A valid file cut short in its data: offsets now point past the end.
  write_safetensors(dir.file("cut.safetensors"), header, "\x01\x02");
  expect_error([&] { SafetensorsFile f(dir.file("cut.safetensors")); }, {"cut.safetensors", "'w'", "past the end"});

  expect_error([&] { SafetensorsFile f(dir.path().string()); }, {dir.path().string(), "not a regular file"});
  expect_error([&] { SafetensorsFile f(dir.file("absent.safetensors")); }, {"absent.safetensors", "cannot open"});
}

// The reference reader's rule: the tensors, in order of data_offsets, tile the data buffer with
// no gap, no overlap and nothing left over.
TEST(SafetensorsCorrupt, TensorsMustCoverTheBufferExactly) {
  const std::vector<Corrupt> cases = {
      {"gap between tensors",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
       16,
       {"'b'", "gap of 4 bytes after tensor 'a'"}},
      {"first tensor not at 0",
       R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8,
       {"'w'", "gap of 4 bytes after the start"}},
      {"bytes left over",
       R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       12,
       {"cover 4 bytes", "holds 12"}},
      {"no tensors but data", R"({})", 4, {"cover 0 bytes", "holds 4"}},
  };
  expect_each_refused(cases);
}

// A header length shortened by 1-7 bytes still parses (the header is padded with spaces to a
// multiple of 8, as safetensors writes it) but would shift every tensor by those bytes.
TEST(SafetensorsCorrupt, ShortenedHeaderLengthIsRefused) {
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.resize((header.size() + 7) / 8 * 8 + 8, ' ');  // at least 8 spaces of padding
  const std::vector<float> v = {1.5f, -2.0f};
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, header, bytes_of(v));
  EXPECT_EQ(to_f32(SafetensorsFile(path).tensors().at("w")).values(), v);  // the intact file reads
  for (uint64_t shorter = 1; shorter <= 7; ++shorter) {
    SCOPED_TRACE(shorter);
    const uint64_t n = header.size() - shorter;
    write_raw(path, std::string(reinterpret_cast<const char*>(&n), 8) + header + bytes_of(v));
    expect_error([&] { SafetensorsFile f(path); }, {path, "cover 8 bytes", "holds " + std::to_string(8 + shorter)});
  }
}

TEST(SafetensorsCorrupt, EveryTruncationIsAnError) {
  // Cutting a valid file at any byte must give an Error, never a crash or a silent success.
  const std::vector<float> v = {1, 2, 3, 4};
  const std::string header = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  const uint64_t n = header.size();
  const std::string full = std::string(reinterpret_cast<const char*>(&n), 8) + header + bytes_of(v);
  TempDir dir;
  for (size_t cut = 0; cut < full.size(); ++cut) {
    const std::string path = dir.file("cut.safetensors");
    write_raw(path, full.substr(0, cut));
    EXPECT_THROW(SafetensorsFile f(path), Error) << "cut at " << cut;
  }
  write_raw(dir.file("ok.safetensors"), full);
  EXPECT_EQ(to_f32(SafetensorsFile(dir.file("ok.safetensors")).tensors().at("w")).values(), v);
}

TEST(SafetensorsCorrupt, RandomByteFlipsNeverCrash) {
  // Mutated headers and lengths: opening either succeeds (then every float tensor converts) or
  // throws headscope::Error; never another exception, never an out-of-range read.
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<uint16_t> b = {0x3C00, 0x4000, 0x7C00, 0x0001};
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"F16","shape":[4],"data_offsets":[24,32]}})";
  const uint64_t n = header.size();
  const std::string original = std::string(reinterpret_cast<const char*>(&n), 8) + header + bytes_of(a) + bytes_of(b);
  std::mt19937 rng(7);
  TempDir dir;
  const std::string path = dir.file("fuzz.safetensors");
  int opened = 0, rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % bytes.size();
      // Half the flips write a JSON-significant character, so mutations get past the parser.
      static const char kJson[] = "{}[]\",:0123456789-e ";
      bytes[at] = rng() % 2 ? kJson[rng() % (sizeof kJson - 1)] : static_cast<char>(rng() & 0xFF);
    }
    write_raw(path, bytes);
    try {
      const SafetensorsFile f(path);
      for (const auto& [name, raw] : f.tensors())
        if (raw.dtype == DType::F32 || raw.dtype == DType::F16 || raw.dtype == DType::BF16 || raw.dtype == DType::F64)
          (void)to_f32(raw);
      ++opened;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(opened, 0);
}

// ---- the real default model against the `safetensors` package ----

TEST(SafetensorsModel, MatchesPythonSafetensors) {
  const std::string model = headscope::testing::env_or_fail("HEADSCOPE_MODEL");
  const std::string goldens = headscope::testing::env_or_fail("HEADSCOPE_GOLDENS");
  ASSERT_FALSE(model.empty() || goldens.empty());
  std::ifstream in(goldens + "/safetensors_model.json");
  ASSERT_TRUE(in) << "missing golden " << goldens << "/safetensors_model.json (run tests/reference/make_goldens.py)";
  const nlohmann::json g = nlohmann::json::parse(in);

  const WeightStore ws = WeightStore::open_dir(model);
  const auto names = ws.names();
  EXPECT_EQ(names.size(), g["n_tensors"].get<size_t>());
  for (size_t i = 0; i < g["first_names"].size(); ++i) EXPECT_EQ(names.at(i), g["first_names"][i].get<std::string>());

  ASSERT_GE(g["tensors"].size(), 4u);
  for (const auto& rec : g["tensors"]) {
    const std::string name = rec["name"];
    SCOPED_TRACE(name);
    const RawTensor& raw = ws.raw(name);
    EXPECT_STREQ(dtype_name(raw.dtype), rec["dtype"].get<std::string>().c_str());
    const auto shape = rec["shape"].get<std::vector<int64_t>>();
    EXPECT_EQ(raw.shape, shape);
    if (rec.contains("samples")) {
      const Tensor t = ws.get(name, shape);
      for (const auto& s : rec["samples"])
        EXPECT_EQ(t.data.at(s[0].get<size_t>()), static_cast<float>(s[1].get<double>())) << "flat index " << s[0];
      double sum = 0, abs_sum = 0;
      for (float x : t.data) sum += x, abs_sum += std::fabs(x);
      const double tol = 1e-9 * rec["abs_sum"].get<double>();
      EXPECT_NEAR(sum, rec["sum"].get<double>(), tol);
      EXPECT_NEAR(abs_sum, rec["abs_sum"].get<double>(), tol);
    } else {
      ASSERT_EQ(raw.dtype, DType::I64);
      for (const auto& s : rec["int_samples"]) {
        int64_t v;
        std::memcpy(&v, raw.data + 8 * s[0].get<size_t>(), 8);
        EXPECT_EQ(v, s[1].get<int64_t>());
      }
      EXPECT_THROW(to_f32(raw), Error);
    }
  }
}

}  // namespace
