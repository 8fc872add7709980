// libFuzzer target: a config.json for every model family. The model folder holds only the config,
// so loading reads and checks the hyperparameters and then stops at the missing weights with an
// Error; what must never happen is a crash, an exception other than Error, or a huge allocation
// driven by a number in the config.
#include <fstream>

#include "fuzz_support.h"
#include "headscope/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "headscope_config_fuzz_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    return std::filesystem::path(tmpl);
  }();
  {
    std::ofstream out(dir / "config.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  fuzz::expect_ok_or_error([&] { (void)Model::load(dir.string()); });
  return 0;
}
