// libFuzzer target: a GAP coreference TSV (the gold data the atlas reads) → examples. Whatever is
// accepted must have each mention's byte span inside the text and spelling the mention.
#include <cstdlib>

#include "analysis/coref.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  fuzz::expect_ok_or_error([&] {
    const auto examples = analysis::parse_gap_tsv({reinterpret_cast<const char*>(data), size}, "fuzz.tsv");
    for (const auto& ex : examples)
      for (const analysis::Mention* m : {&ex.pronoun, &ex.a, &ex.b}) {
        if (m->begin < 0 || m->end < m->begin || m->end > static_cast<int64_t>(ex.text.size())) std::abort();
        if (ex.text.compare(static_cast<size_t>(m->begin), static_cast<size_t>(m->end - m->begin), m->text) != 0)
          std::abort();
      }
  });
  return 0;
}
