#include "io/npy.h"

#include <cstdint>
#include <fstream>

#include "headscope/error.h"

namespace headscope::io {

void write_npy(const std::string& path, const Tensor& t) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape.size(); ++i) dict += std::to_string(t.shape[i]) + ", ";
  if (t.shape.size() > 1)
    dict.resize(dict.size() - 2);  // "(3,)" for rank 1, "(2, 3)" otherwise
  else if (t.shape.size() == 1)
    dict.resize(dict.size() - 1);
  dict += "), }";
  const size_t preamble = 10;  // magic (6) + version (2) + header length (2)
  size_t total = preamble + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(path + ": cannot open for writing");
  const uint16_t len = static_cast<uint16_t>(dict.size());
  out.write("\x93NUMPY\x01\x00", 8);
  const char len_le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_le, 2);
  out.write(dict.data(), static_cast<std::streamsize>(dict.size()));
  out.write(reinterpret_cast<const char*>(t.ptr()), static_cast<std::streamsize>(t.data.size() * sizeof(float)));
  if (!out) throw Error(path + ": write failed (disk full?)");
}

}  // namespace headscope::io
