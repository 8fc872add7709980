// headscope CLI — small helpers shared by the subcommands.
#pragma once
#include <string>

#include "headscope/headscope.h"

namespace headscope::cli {

inline constexpr const char* kDefaultModelDir = "models/all-MiniLM-L6-v2";
// $HEADSCOPE_MODEL if set, else kDefaultModelDir.
std::string default_model_dir();
// Whole file as bytes ('-' = stdin); Error naming the path if it cannot be read or exceeds 16 MiB.
std::string read_text_file(const std::string& path);

}  // namespace headscope::cli
