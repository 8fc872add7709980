// libFuzzer target: a CoNLL-U treebank (the gold data the atlas reads) → dependency sentences.
// Whatever is accepted must be a tree the scorers can index: every head within 0..n words.
#include <cstdlib>

#include "analysis/syntax.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  fuzz::expect_ok_or_error([&] {
    const auto sentences = analysis::parse_conllu({reinterpret_cast<const char*>(data), size}, "fuzz.conllu");
    for (const auto& s : sentences) {
      for (const auto& w : s.words)
        if (w.head < 0 || w.head > static_cast<int32_t>(s.words.size())) std::abort();
      std::vector<std::pair<int64_t, int64_t>> spans;
      const std::string joined = analysis::join_words(s, &spans);
      for (const auto& [b, e] : spans)
        if (b < 0 || e < b || e > static_cast<int64_t>(joined.size())) std::abort();
    }
  });
  return 0;
}
