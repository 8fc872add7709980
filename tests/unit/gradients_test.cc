// Model::gradients (docs/gradients.md) beyond the comparisons with PyTorch autograd
// (tests/reference/test_grad.py): the two ways a decoder's backward gets each layer's activations
// (kept from the forward pass, or computed again from the layer's input) give the same gradients;
// the forward capture read from the kept activations equals run()'s; the memory estimate refuses a
// pass over the budget with the longest text that fits; a central difference of the metric along a
// random direction of the token embeddings equals the gradient's projection; encoders refuse edges.
// (Each receiver against autograd: tests/reference/test_grad.py; an encoder layer's receivers
// summing to its attention block's share: tests/python/test_gradients.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "headscope/circuits.h"
#include "headscope/error.h"
#include "headscope/model.h"
#include "test_support.h"

namespace headscope {
namespace {

const char* kText = "Mary and John went in, John gave it to";

std::unique_ptr<Model> tiny(const std::string& name, LoadOptions o = {}) {
  const auto dir = testing::goldens_dir("decoders") / name;
  if (!std::filesystem::exists(dir / "config.json")) return nullptr;
  return Model::load(dir.string(), o);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.shape != b.shape) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.data.size(); ++i) m = std::max(m, double(std::fabs(a.data[i] - b.data[i])));
  return m;
}
double max_abs(const Tensor& a) {
  double m = 0;
  for (float x : a.data) m = std::max(m, double(std::fabs(x)));
  return m;
}

GradientSeed seed_of(const Model& m) { return metric_seed(m, PatchMetric::kLogitDiff, 279, 290); }

class Families : public ::testing::TestWithParam<const char*> {};

TEST_P(Families, KeptAndRecomputedActivationsGiveTheSameGradients) {
  const auto m = tiny(GetParam());
  if (!m) GTEST_SKIP() << "goldens missing";
  const Encoding e = m->encode(kText);
  GradientOptions kept;
  kept.receivers = true;
  kept.forward = CaptureOptions::attention_only();
  kept.forward.head_outputs = kept.forward.queries_keys = kept.forward.values = kept.forward.mlp_outputs = true;
  kept.forward.hidden_states = true;
  GradientOptions again = kept;
  again.forward.contributions = true;  // a capture the kept activations cannot give: the run is made, layers recomputed
  const Gradients a = m->gradients(e, seed_of(*m), kept), b = m->gradients(e, seed_of(*m), again);
  EXPECT_NEAR(a.metric, b.metric, 1e-6);
  for (const auto& [x, y] : {std::pair{&a.hidden_states, &b.hidden_states},
                             {&a.attention, &b.attention},
                             {&a.head_outputs, &b.head_outputs},
                             {&a.receivers, &b.receivers},
                             {&a.queries, &b.queries},
                             {&a.embeddings, &b.embeddings}})
    EXPECT_LE(max_abs_diff(*x, *y), 1e-5 * max_abs(*y));
  // The forward capture read from the kept activations is run()'s.
  const Capture run = m->run(e, kept.forward);
  for (const auto& [x, y] : {std::pair{&a.forward.attention, &run.attention},
                             {&a.forward.hidden_states, &run.hidden_states},
                             {&a.forward.head_outputs, &run.head_outputs},
                             {&a.forward.queries, &run.queries},
                             {&a.forward.values, &run.values},
                             {&a.forward.mlp_outputs, &run.mlp_outputs},
                             {&a.forward.attn_output, &run.attn_output}})
    EXPECT_LE(max_abs_diff(*x, *y), 1e-5 * (1 + max_abs(*y)));
}

TEST_P(Families, ACompanionSharingThePassIsCapturedAsItsOwnRun) {
  const auto m = tiny(GetParam());
  if (!m) GTEST_SKIP() << "goldens missing";
  const Encoding e = m->encode(kText), other = m->encode("Anna and Paul went in, Mark gave it to");
  ASSERT_EQ(e.size(), other.size());
  GradientOptions o;
  o.forward = CaptureOptions::attention_only();
  o.forward.head_outputs = o.forward.queries_keys = o.forward.values = o.forward.mlp_outputs = true;
  o.forward.hidden_states = o.forward.logits = o.forward.last_logits = true;
  const Gradients alone = m->gradients(e, seed_of(*m), o);
  o.companion = &other;
  const Gradients both = m->gradients(e, seed_of(*m), o);
  EXPECT_LE(max_abs_diff(both.hidden_states, alone.hidden_states), 1e-5 * max_abs(alone.hidden_states));
  EXPECT_LE(max_abs_diff(both.head_outputs, alone.head_outputs), 1e-5 * max_abs(alone.head_outputs));
  const Capture run = m->run(other, o.forward);
  for (const auto& [x, y] : {std::pair{&both.companion.attention, &run.attention},
                             {&both.companion.hidden_states, &run.hidden_states},
                             {&both.companion.head_outputs, &run.head_outputs},
                             {&both.companion.keys, &run.keys},
                             {&both.companion.values, &run.values},
                             {&both.companion.mlp_outputs, &run.mlp_outputs},
                             {&both.companion.attn_output, &run.attn_output},
                             {&both.companion.logits, &run.logits}})
    EXPECT_LE(max_abs_diff(*x, *y), 1e-5 * (1 + max_abs(*y)));
}

TEST_P(Families, TheGradientPredictsACentralDifferenceOfTheMetric) {
  const auto m = tiny(GetParam());
  if (!m) GTEST_SKIP() << "goldens missing";
  const Encoding e = m->encode(kText);
  GradientOptions o;
  o.attention = o.queries_keys_values = false;
  o.forward = CaptureOptions::attention_only();
  o.forward.attention = false;
  const Gradients g = m->gradients(e, seed_of(*m), o);
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  // A random direction, each step a thousandth of the embeddings' root mean square.
  double rms = 0;
  for (float x : g.token_embeddings.data) rms += double(x) * x;
  rms = std::sqrt(rms / double(g.token_embeddings.data.size()));
  Tensor dir(g.token_embeddings.shape), plus = g.token_embeddings, minus = g.token_embeddings;
  double predicted = 0;
  const double h = 1e-3 * rms;
  for (size_t i = 0; i < dir.data.size(); ++i) {
    dir.data[i] = n(rng);
    plus.data[i] = static_cast<float>(plus.data[i] + h * dir.data[i]);
    minus.data[i] = static_cast<float>(minus.data[i] - h * dir.data[i]);
    predicted += double(dir.data[i]) * g.embeddings.data[i];
  }
  o.embeddings = &plus;
  const double up = m->gradients(e, seed_of(*m), o).metric;
  o.embeddings = &minus;
  const double down = m->gradients(e, seed_of(*m), o).metric;
  // (float32 passes: the difference carries ~1e-7 / 1e-3 of rounding per unit of the metric)
  EXPECT_NEAR((up - down) / (2 * h), predicted, 3e-2 * (1 + std::fabs(predicted)));
}

INSTANTIATE_TEST_SUITE_P(Decoders, Families,
                         ::testing::Values("llama_gqa3", "gemma3_text", "gemma2", "olmo2", "gpt2", "phi3", "qwen3"));

TEST(Gradients, APassOverTheBudgetIsRefusedWithTheLongestTextThatFits) {
  auto probe = tiny("llama_gqa3");
  if (!probe) GTEST_SKIP() << "goldens missing";
  const Encoding e = probe->encode(kText);
  LoadOptions o;
  o.run_memory_budget = probe->gradient_bytes(12, {});
  const auto m = tiny("llama_gqa3", o);
  try {
    (void)m->gradients(e, seed_of(*m), {});
    FAIL() << "no refusal";
  } catch (const ResourceError& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("a forward and backward pass over " + std::to_string(e.size()) + " tokens"), std::string::npos)
        << what;
    EXPECT_NE(what.find("the longest text that fits is about 12 tokens"), std::string::npos) << what;
  }
  EXPECT_LT(probe->gradient_bytes(10, {}), probe->gradient_bytes(20, {}));
}

TEST(Gradients, EncodersRefuseEdgesAndSeedsCheckTheirTokens) {
  const Model& minilm = testing::default_model();
  PromptPairs pairs;
  pairs.pairs.push_back({"The cat sat on the mat.", "The dog sat on the mat.", "", "", ""});
  AttributionRequest r;
  r.metric = PatchMetric::kCosine;
  r.edges = true;
  EXPECT_THROW(attribution_patch(minilm, pairs, r), Error);
  const auto m = tiny("llama_gqa3");
  if (!m) GTEST_SKIP() << "goldens missing";
  EXPECT_THROW(metric_seed(*m, PatchMetric::kLogitDiff, 0, m->config().vocab_size), Error);
  EXPECT_THROW(metric_seed(*m, PatchMetric::kCosine, 0, 1), Error);
}

}  // namespace
}  // namespace headscope
