// libFuzzer target: a .safetensors file (header, offsets, dtypes, shapes, data) → SafetensorsFile,
// then every tensor converted to fp32 when it is small enough to be worth it.
#include "fuzz_support.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  fuzz::MemFile file({reinterpret_cast<const char*>(data), size}, "model.safetensors");
  fuzz::expect_ok_or_error([&] {
    io::SafetensorsFile st(file.path());
    for (const auto& entry : st.tensors()) {
      const io::RawTensor& raw = entry.second;
      if (raw.nbytes > (1u << 20)) continue;
      fuzz::expect_ok_or_error([&] { (void)io::to_f32(raw); });
    }
  });
  return 0;
}
