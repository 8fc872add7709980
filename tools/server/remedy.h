// headscope server — a core error's remedy (headscope::Remedy) said as the request that asks for it.
#pragma once
#include <string>

#include "headscope/error.h"

namespace headscope::server {

// The message, then how to change the request: a field, or a shorter text. The server picks the
// attention maps itself (dense while they fit, streamed beyond), so a maps remedy has no field here.
inline std::string error_message(const Error& e) {
  std::string message = e.what();
  switch (e.remedy()) {
    case Remedy::kNone:
    case Remedy::kStreamMaps:
      break;
    case Remedy::kTruncate:
      message += "; send \"truncate\": true to cut it";
      break;
    case Remedy::kDenseMaps:
    case Remedy::kShorterText:
      message += "; send a shorter text";
      break;
  }
  return message;
}

}  // namespace headscope::server
