// hello_heads — the smallest complete use of headscope's public API.
//
// Loads a model, runs one text through it, and prints what one attention head does: its
// statistics (docs/metrics.md) and the role the analysis gives it, with the evidence. Only
// include/headscope/ is used, as by every frontend.
//
//   hello_heads [MODEL_DIR] [LAYER] [HEAD]
//   (MODEL_DIR defaults to $HEADSCOPE_MODEL, then models/all-MiniLM-L6-v2)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "headscope/headscope.h"
#include "headscope/pipeline.h"

namespace {

std::string model_dir(int argc, char** argv) {
  if (argc > 1) return argv[1];
  const char* env = std::getenv("HEADSCOPE_MODEL");
  return env != nullptr && *env != '\0' ? env : "models/all-MiniLM-L6-v2";
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // 1. Load: config.json picks the family, the tensors are read and fused once.
    const auto model = headscope::Model::load(model_dir(argc, argv));
    const headscope::ModelConfig& c = model->config();
    const int layer = argc > 2 ? std::atoi(argv[2]) : 0;
    const int head = argc > 3 ? std::atoi(argv[3]) : 2;
    if (layer < 0 || layer >= c.n_layer || head < 0 || head >= c.n_head) {
      std::fprintf(stderr, "hello_heads: %s has %d layers of %d heads\n", c.name.c_str(), c.n_layer, c.n_head);
      return 1;
    }

    // 2. Encode and analyse. The probe (random tokens repeated twice) supplies the evidence for
    //    induction and duplicate-token heads; it is measured once per model.
    const std::string text = "The cat sat on the mat. The cat was happy.";
    const auto probe = headscope::probe(*model);
    const headscope::RunAnalysis run = headscope::analyse(*model, text, model->encode(text), probe);

    // 3. Read one head: index layer * n_head + head, at token level.
    const size_t i = static_cast<size_t>(layer * c.n_head + head);
    const headscope::analysis::HeadStats& s = run.token_level.stats[i];
    const headscope::analysis::HeadRoles& r = run.token_level.roles[i];

    std::printf("%s: %d layers x %d heads; %d tokens:", c.name.c_str(), c.n_layer, c.n_head, run.T());
    for (const headscope::Token& t : run.encoding.tokens) std::printf(" %s", t.text.c_str());
    std::printf("\n\nlayer %d, head %d\n", layer, head);
    std::printf("  entropy        %.3f bits (%.2f of the maximum)\n", s.entropy_bits, s.entropy_norm);
    std::printf("  max attention  %.3f\n", s.max_attention);
    std::printf("  keys for 90%%   %.1f\n", s.keys_90);
    std::printf("  previous token %.3f   self %.3f   first token %.3f\n", s.prev_mass, s.self_mass, s.first_mass);
    std::printf("  mean offset    %+.2f tokens\n", s.mean_offset);
    const auto& role = headscope::analysis::role_info(r.primary.role);
    std::printf("\nrole: %.*s%s%s (confidence %.2f)\n  %s\n", static_cast<int>(role.name.size()), role.name.data(),
                r.primary.detail.empty() ? "" : " ", r.primary.detail.c_str(), r.confidence,
                r.primary.evidence.c_str());

    // 4. The same numbers straight from the captured attention [layer, head, q, k]: the mean of
    //    each row's largest weight is max_attention.
    const int T = run.T();
    const float* a = run.capture.attention.ptr() + (static_cast<int64_t>(layer) * c.n_head + head) * T * T;
    double sum = 0;
    for (int q = 0; q < T; ++q) {
      float best = 0;
      for (int k = 0; k < T; ++k) best = a[q * T + k] > best ? a[q * T + k] : best;
      sum += best;
    }
    std::printf("\ncheck: mean row maximum from the capture = %.3f\n", sum / T);
    return std::abs(sum / T - s.max_attention) < 1e-5 ? 0 : 1;
  } catch (const headscope::Error& e) {
    std::fprintf(stderr, "hello_heads: %s\n", e.what());
    return 2;
  }
}
