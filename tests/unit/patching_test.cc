// Activation patching inside the pass (Patch in headscope/model.h, src/capture/patching.cc) and the
// sweeps built on it (src/circuits/patching.cc). What transformers computes with forward hooks is
// checked by tests/reference/test_patch.py; here, identities that hold whatever the weights:
//   - a patched pass resumed from the patch's layer equals the whole patched run;
//   - every site patched from the run itself changes nothing;
//   - the residual stream patched at layer 0, every position, gives the source run's output;
//   - q and k patched give the source's attention pattern; pattern and v patched give the
//     source's head output;
//   - bad patches are refused with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "headscope/circuits.h"
#include "headscope/headscope.h"
#include "headscope/pipeline.h"
#include "test_support.h"

namespace headscope {
namespace {

using Site = Patch::Site;

CaptureOptions everything(const Model& m) {
  CaptureOptions o;
  o.attention = o.head_outputs = o.hidden_states = o.queries_keys = o.values = o.mlp_outputs = true;
  o.contributions = false;
  o.logits = o.last_logits = m.config().causal;
  return o;
}

// The model's output: the last row's logits (decoders) or the last hidden state (encoders).
std::vector<float> output(const Model& m, const Capture& c) {
  if (m.config().causal) {
    const int64_t V = c.logits.dim(1);
    const float* row = c.logits.ptr() + (c.logits.dim(0) - 1) * V;
    return {row, row + V};
  }
  const int64_t n = int64_t(c.T) * c.d_model;
  const float* h = c.hidden_states.ptr() + int64_t(c.n_layer) * n;
  return {h, h + n};
}

float max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  float scale = 1e-6f;
  for (float x : b) scale = std::max(scale, std::fabs(x));
  return testing::max_abs_diff(a, b) / scale;
}

// A second encoding of the same length: every third id (after the first) replaced.
Encoding corrupted(const Model& m, const Encoding& e) {
  Encoding c = e;
  for (size_t t = 1; t + 1 < c.tokens.size(); t += 3)
    c.tokens[t].id = (c.tokens[t].id * 7 + 11) % m.config().vocab_size;
  return c;
}

struct Runs {
  Encoding base_enc;
  Capture base, source;
};

Runs runs_of(const Model& m, const std::string& text) {
  Runs r;
  const Encoding clean = m.encode(text);
  r.base_enc = corrupted(m, clean);
  r.base = m.run(r.base_enc, everything(m));
  r.source = m.run(clean, everything(m));
  return r;
}

// One patch of every site on layer `layer` (head 1 or key/value head 0), all positions or `pos`.
std::vector<Patch> every_site(int layer, int64_t pos, const Capture* source) {
  return {{Site::kHeadOutput, layer, 1, pos, source}, {Site::kQuery, layer, 1, pos, source},
          {Site::kKey, layer, 0, pos, source},        {Site::kValue, layer, 0, pos, source},
          {Site::kPattern, layer, 1, pos, source},    {Site::kResidual, layer, -1, pos, source},
          {Site::kAttention, layer, -1, pos, source}, {Site::kMlp, layer, -1, pos, source}};
}

void check_model(const Model& m, const std::string& text) {
  const Runs r = runs_of(m, text);
  const int L = m.config().n_layer;
  for (int layer = 0; layer < L; ++layer) {
    for (int64_t pos : {int64_t(-1), int64_t(r.base.T - 1)}) {
      for (const Patch& p : every_site(layer, pos, &r.source)) {
        SCOPED_TRACE(std::string(patch_site_name(p.site)) + " layer " + std::to_string(layer) + " position " +
                     std::to_string(pos));
        const std::vector<Patch> one = {p};
        CaptureOptions whole = everything(m);
        whole.patches = &one;
        const Capture full = m.run(r.base_enc, whole);
        CaptureOptions part;
        part.attention = part.head_outputs = part.contributions = false;
        part.logits = part.last_logits = m.config().causal;
        part.patches = &one;
        const Capture resumed = m.resume(r.base_enc, layer, r.base.hidden_states, part);
        EXPECT_LE(max_rel(output(m, resumed), output(m, full)), 1e-6f);
        // The patch changes the output (the two prompts differ where these sites read).
        if (pos < 0 && p.site == Site::kResidual) EXPECT_GT(max_rel(output(m, full), output(m, r.base)), 1e-4f);

        // From the run itself: nothing changes.
        std::vector<Patch> self = one;
        self[0].source = &r.base;
        whole.patches = &self;
        EXPECT_LE(max_rel(output(m, m.run(r.base_enc, whole)), output(m, r.base)), 1e-6f);
      }
    }
  }
  // The residual stream entering layer 0 at every position is the source's input: its output.
  const std::vector<Patch> all = {{Site::kResidual, 0, -1, -1, &r.source}};
  CaptureOptions o = everything(m);
  o.patches = &all;
  EXPECT_LE(max_rel(output(m, m.run(r.base_enc, o)), output(m, r.source)), 1e-6f);

  // q of head 1 and k of its key/value head: head 1's pattern is the source's.
  const int layer = L - 1, h = 1, g = r.base.kv_head_of[1];
  const int64_t T = r.base.T, Dh = r.base.d_head, H = r.base.n_head;
  const std::vector<Patch> qk = {{Site::kQuery, layer, h, -1, &r.source}, {Site::kKey, layer, g, -1, &r.source}};
  o.patches = &qk;
  const Capture with_qk = m.run(r.base_enc, o);
  const auto rows = [&](const Tensor& t, int64_t n) {
    const float* p = t.ptr() + (int64_t(layer) * H + h) * n;
    return std::vector<float>(p, p + n);
  };
  EXPECT_LE(testing::max_abs_diff(rows(with_qk.attention, T * T), rows(r.source.attention, T * T)), 1e-6f);
  EXPECT_GT(testing::max_abs_diff(rows(r.base.attention, T * T), rows(r.source.attention, T * T)), 1e-4f);
  // The pattern and v: head 1's output is the source's.
  const std::vector<Patch> pv = {{Site::kPattern, layer, h, -1, &r.source}, {Site::kValue, layer, g, -1, &r.source}};
  o.patches = &pv;
  const Capture with_pv = m.run(r.base_enc, o);
  EXPECT_LE(testing::max_abs_diff(rows(with_pv.head_outputs, T * Dh), rows(r.source.head_outputs, T * Dh)), 1e-5f);
  EXPECT_LE(testing::max_abs_diff(rows(with_pv.attention, T * T), rows(r.source.attention, T * T)), 0.0f);
}

TEST(Patching, GqaLlamaIdentities) {
  const auto m = Model::load((testing::goldens_dir("decoders") / "llama_gqa3").string());
  ASSERT_EQ(m->config().n_kv_head, 2);
  check_model(*m, "The quick brown fox jumps over the lazy dog.");
}

TEST(Patching, Gemma3SandwichNormIdentities) {
  const auto m = Model::load((testing::goldens_dir("decoders") / "gemma3_text").string());
  check_model(*m, "The quick brown fox jumps over the lazy dog.");
}

TEST(Patching, EncoderIdentities) {
  const auto m = Model::load((testing::goldens_dir("encoders") / "bert_bare").string());
  check_model(*m, "the quick brown fox jumps over the lazy dog");
}

TEST(Patching, BadPatchesAreRefused) {
  const auto m = Model::load((testing::goldens_dir("decoders") / "llama_gqa3").string());
  const Runs r = runs_of(*m, "The quick brown fox jumps over the lazy dog.");
  const auto refused = [&](Patch p, const std::vector<std::string>& parts, CaptureOptions o = {}) {
    const std::vector<Patch> v = {p};
    o.patches = &v;
    testing::expect_error([&] { m->run(r.base_enc, o); }, parts);
  };
  refused({Site::kHeadOutput, 2, 0, -1, &r.source}, {"layer 2", "layers 0..1"});
  refused({Site::kHeadOutput, 0, 6, -1, &r.source}, {"head 6", "query heads 0..5"});
  refused({Site::kKey, 0, 2, -1, &r.source}, {"key/value heads 0..1", "grouped-query"});
  refused({Site::kResidual, 0, -1, r.base.T, &r.source}, {"positions 0.."});
  refused({Site::kResidual, 0, -1, -1, nullptr}, {"no source run"});
  Capture bare = m->run(r.base_enc, CaptureOptions::attention_only());
  refused({Site::kValue, 0, 0, -1, &bare}, {"did not record it", "values"});
  const Capture shorter = m->run(m->encode("The quick brown fox."), everything(*m));
  refused({Site::kHeadOutput, 0, 0, -1, &shorter}, {"same number of tokens"});
  CaptureOptions streamed = CaptureOptions::attention_only();
  streamed.attention = false;
  streamed.attention_sink = [](int, int64_t, int64_t, int64_t, const float*) {};
  refused({Site::kHeadOutput, 0, 0, -1, &r.source}, {"streamed run"}, streamed);
}

TEST(Patching, SweepOverPairsNormalisesAndRefuses) {
  const auto m = Model::load((testing::goldens_dir("decoders") / "llama_gqa3").string());
  PromptPairs bad{"custom", 0, "", {{"The quick brown fox", "The quick brown fox jumps over", "x", "y", ""}}};
  testing::expect_error([&] { patch_sweep(*m, bad, {}); }, {"same number of tokens"});
  const auto enc = Model::load((testing::goldens_dir("encoders") / "bert_bare").string());
  // A corrupted prompt with as many tokens for the tiny tokenizer: the first word that fits.
  std::string corrupt;
  for (const char* w : {"dog", "cat", "lazy", "over", "jumps", "the", "brown"})
    if (corrupt.empty() &&
        enc->encode(std::string("the quick ") + w + " fox").size() == enc->encode("the quick brown fox").size())
      corrupt = std::string("the quick ") + w + " fox";
  ASSERT_FALSE(corrupt.empty());
  PromptPairs pair{"custom", 0, "", {{"the quick brown fox", corrupt, "", "", ""}}};
  PatchRequest request;
  testing::expect_error([&] { patch_sweep(*enc, pair, request); }, {"encoder", "cosine"});
  request.metric = PatchMetric::kCosine;
  request.sweeps = {PatchSweep::kResidual, PatchSweep::kKey};
  request.layers = {0};
  const PatchReport rep = patch_sweep(*enc, pair, request);
  EXPECT_NEAR(rep.clean, 0.0, 1e-12);  // 1 − cos of the clean embedding with itself (to rounding)
  EXPECT_GT(rep.corrupt, 0.0);
  // Layer 0's residual stream at every position restores everything; one position does not.
  double restored_positions = 0;
  for (const PatchEffect& e : rep.effects) {
    EXPECT_EQ(e.layer, 0);
    EXPECT_NEAR(e.normalised, (e.value - rep.corrupt) / (rep.clean - rep.corrupt), 1e-12);
    if (e.sweep == PatchSweep::kResidual) restored_positions += e.value < rep.corrupt ? 1 : 0;
  }
  EXPECT_GE(restored_positions, 1);
  request.layers = {5};
  testing::expect_error([&] { patch_sweep(*enc, pair, request); }, {"layers 0.."});
}

// A sweep runs the sites of one layer together in packed passes (resume_batch): every site's
// value is that of its own whole patched run, each read from the last row's logits by hand.
TEST(Patching, PackedSweepEqualsOneWholeRunPerSite) {
  for (const char* name : {"llama_gqa3", "gemma3_text"}) {
    const auto m = Model::load((testing::goldens_dir("decoders") / name).string());
    // Two prompts of one token count and two one-token answers, for this tiny tokenizer.
    std::string clean, corrupt;
    for (const char* w : {"dog", "cat", "owl", "bee", "hen", "over", "brown", "lazy", "a", "it"})
      if (clean.empty() && m->encode(std::string("the quick ") + w + " jumps over the").size() ==
                               m->encode("the quick fox jumps over the").size())
        clean = "the quick fox jumps over the", corrupt = std::string("the quick ") + w + " jumps over the";
    ASSERT_FALSE(clean.empty()) << name;
    const Encoding ce = m->encode(clean), xe = m->encode(corrupt);
    EncodeOptions plain;
    plain.add_special_tokens = false;
    std::vector<std::string> answers;
    for (const char* t : {" lazy", " the", " a", "a", "e", "t", "x", "y", "o", "s"})
      if (answers.size() < 2 && m->tokenizer().encode(t, plain).size() == 1) answers.push_back(t);
    ASSERT_EQ(answers.size(), 2u) << name;
    const int32_t a = m->tokenizer().encode(answers[0], plain).tokens[0].id;
    const int32_t b = m->tokenizer().encode(answers[1], plain).tokens[0].id;
    PromptPairs pairs{"custom", 0, "", {{clean, corrupt, answers[0], answers[1], ""}}};
    PatchRequest request;
    request.sweeps = {PatchSweep::kHead, PatchSweep::kHeadPosition, PatchSweep::kKey, PatchSweep::kResidual};
    const PatchReport rep = patch_sweep(*m, pairs, request);  // denoising: the corrupted run patched from the clean
    const Capture source = m->run(ce, everything(*m));
    double worst = 0, spread = 0;
    for (const PatchEffect& e : rep.effects) {
      Patch::Site site = Site::kHeadOutput;
      if (e.sweep == PatchSweep::kKey) site = Site::kKey;
      if (e.sweep == PatchSweep::kResidual) site = Site::kResidual;
      const std::vector<Patch> patch = {{site, e.layer, e.head, e.position, &source}};
      CaptureOptions o;
      o.attention = o.head_outputs = o.contributions = false;
      o.logits = o.last_logits = true;
      o.patches = &patch;
      const std::vector<float> row = output(*m, m->run(xe, o));
      const double want = double(row[size_t(a)]) - double(row[size_t(b)]);
      worst = std::max(worst, std::abs(e.value - want));
      spread = std::max(spread, std::abs(want - rep.corrupt));
    }
    EXPECT_GT(spread, 1e-4) << name;  // the patches move the metric
    EXPECT_LE(worst, 1e-5 * std::max(1.0, std::abs(rep.clean))) << name;
    std::printf("%s: %zu sites, packed sweep vs whole runs %.2e (largest move %.3f)\n", name, rep.effects.size(), worst,
                spread);
  }
}

// A sweep over a dataset of pairs is "shard -> parts -> merge": the parts of two shards, through
// their bytes and appended in dataset order, give the sweep over all the pairs bit for bit.
TEST(Patching, PartsOfShardsMergeIntoTheWholeSweepBitForBit) {
  const auto m = Model::load((testing::goldens_dir("decoders") / "llama_gqa3").string());
  PromptPairs all{"custom", 0, "", {}};
  // Pairs of equal length for the tiny tokenizer: words of the largest group with one token count.
  std::map<size_t, std::vector<std::string>> by_count;
  for (const char* w : {"fox",   "dog",   "cat", "owl", "bee", "hen", "the", "over", "brown", "lazy",
                        "quick", "jumps", "a",   "an",  "and", "to",  "of",  "in",   "is",    "it"}) {
    const std::string text = std::string("the quick ") + w + " jumps over the";
    by_count[m->encode(text).size()].push_back(text);
  }
  const std::vector<std::string>* group = &by_count.begin()->second;
  for (const auto& entry : by_count)
    if (entry.second.size() > group->size()) group = &entry.second;
  std::vector<std::string> answers;  // two texts the tiny tokenizer makes one token each
  EncodeOptions plain;
  plain.add_special_tokens = false;
  for (const char* a : {" lazy", " the", " a", "a", "e", "t", "x", "y", "o", "s"})
    if (answers.size() < 2 && m->tokenizer().encode(a, plain).size() == 1) answers.push_back(a);
  ASSERT_EQ(answers.size(), 2u);
  for (size_t i = 0; i + 1 < group->size() && all.pairs.size() < 4; ++i)
    all.pairs.push_back({(*group)[i], (*group)[i + 1], answers[0], answers[1], ""});
  ASSERT_GE(all.pairs.size(), 3u);
  PatchRequest request;
  request.sweeps = {PatchSweep::kHead, PatchSweep::kMlp};
  const PatchReport whole = patch_sweep(*m, all, request);
  PromptPairs first = all, rest = all;
  first.pairs.resize(1);
  rest.pairs.erase(rest.pairs.begin());
  PatchParts parts = patch_parts_from_bytes(patch_parts_to_bytes(patch_sweep_parts(*m, first, request)));
  parts.append(patch_parts_from_bytes(patch_parts_to_bytes(patch_sweep_parts(*m, rest, request))));
  const PatchReport merged = patch_report(parts);
  EXPECT_EQ(merged.clean, whole.clean);
  EXPECT_EQ(merged.corrupt, whole.corrupt);
  EXPECT_EQ(merged.n_pairs, whole.n_pairs);
  EXPECT_EQ(merged.passes, whole.passes);
  ASSERT_EQ(merged.effects.size(), whole.effects.size());
  for (size_t i = 0; i < whole.effects.size(); ++i) {
    EXPECT_EQ(merged.effects[i].value, whole.effects[i].value) << i;
    EXPECT_EQ(merged.effects[i].layer, whole.effects[i].layer);
    EXPECT_EQ(merged.effects[i].head, whole.effects[i].head);
  }
  // The mean over pairs, by hand, for one site.
  const size_t S = parts.sites.size(), k = 3;
  double sum = 0;
  for (size_t p = 0; p < parts.pairs(); ++p) sum += parts.values[p * S + k];
  EXPECT_EQ(whole.effects[k].value, sum / double(parts.pairs()));
  // Another request's parts do not merge; bytes that are not parts are refused.
  PatchRequest other = request;
  other.sweeps = {PatchSweep::kHead};
  testing::expect_error([&] { parts.append(patch_sweep_parts(*m, first, other)); }, {"other sites"});
  testing::expect_error([&] { patch_parts_from_bytes("not cbor"); }, {"not a shard's parts"});
  testing::expect_error([&] { patch_report(PatchParts{}); }, {"no pair"});
}

}  // namespace
}  // namespace headscope
