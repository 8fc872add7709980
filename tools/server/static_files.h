// headscope server — request paths and the web UI's files.
//
// A request target is decoded once, here, before the gate and the router see it: percent escapes
// are decoded, and a control byte (below 0x20, or 0x7f), sent raw or escaped, refuses the request
// (a path such as /index.html%00.js must not reach the file system or a log line). The UI's files
// are served from one folder: no "..", nothing that resolves outside the folder, and the
// Content-Type comes from the extension of the file actually read.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "server/api.h"

namespace headscope::server {

// The path of a request target (before '?'), percent-decoded ("%zz" stays as it is). std::nullopt
// when the target does not start with '/' or holds a control byte, raw or escaped.
std::optional<std::string> decode_target_path(std::string_view target);

// The Content-Type of a file by its extension ("application/octet-stream" when unknown).
std::string_view content_type_of(std::string_view filename);

class StaticFiles {
 public:
  // `web_dir` empty or without an index.html: no UI (GET / says so, everything else is 404).
  // Throws Error when web_dir has an index.html but cannot be resolved.
  explicit StaticFiles(const std::string& web_dir);

  bool has_ui() const { return !root_.empty(); }
  // The reply to GET (or HEAD) of a decoded path outside /api/.
  HttpReply get(const std::string& method, const std::string& path) const;

 private:
  std::string root_;  // canonical, without a trailing '/'; empty: no UI
};

// The API's JSON 404 for a path that names nothing.
HttpReply not_found(std::string_view method, std::string_view path);

// A path or header value for a message or the log: control bytes become '?', cut to `max` bytes.
std::string printable(std::string_view s, size_t max = 200);

}  // namespace headscope::server
