// headscope server — request paths and the web UI's files (see static_files.h).
#include "server/static_files.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "headscope/error.h"

namespace headscope::server {
namespace {

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool has_dot_dot_segment(std::string_view path) {
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    if (path.substr(start, end - start) == "..") return true;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

HttpReply text_reply(std::string body) { return {200, "text/plain; charset=utf-8", std::move(body), {}}; }

}  // namespace

std::optional<std::string> decode_target_path(std::string_view target) {
  target = target.substr(0, target.find('?'));
  if (target.empty() || target.front() != '/') return std::nullopt;
  std::string out;
  out.reserve(target.size());
  for (size_t i = 0; i < target.size(); ++i) {
    char c = target[i];
    if (c == '%' && i + 2 < target.size() && hex_value(target[i + 1]) >= 0 && hex_value(target[i + 2]) >= 0) {
      c = static_cast<char>(hex_value(target[i + 1]) * 16 + hex_value(target[i + 2]));
      i += 2;
    }
    if (is_control(static_cast<unsigned char>(c))) return std::nullopt;
    out += c;
  }
  return out;
}

std::string_view content_type_of(std::string_view filename) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".webp", "image/webp"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".wasm", "application/wasm"},
      {".txt", "text/plain; charset=utf-8"},
  };
  const size_t dot = filename.rfind('.');
  const size_t slash = filename.rfind('/');
  if (dot != std::string_view::npos && (slash == std::string_view::npos || dot > slash)) {
    const std::string_view ext = filename.substr(dot);
    for (const auto& [suffix, type] : kTypes)
      if (ext == suffix) return type;
  }
  return "application/octet-stream";
}

std::string printable(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += is_control(static_cast<unsigned char>(c)) ? '?' : c;
  if (s.size() > max) out += "...";
  return out;
}

HttpReply not_found(std::string_view method, std::string_view path) {
  return Api::error(404, "not_found",
                    "no such path: " + printable(method, 16) + " " + printable(path) + " (see docs/api.md)");
}

StaticFiles::StaticFiles(const std::string& web_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (web_dir.empty() || !fs::exists(fs::path(web_dir) / "index.html", ec)) return;
  const fs::path root = fs::canonical(web_dir, ec);
  if (ec) throw Error("--web-dir " + web_dir + ": cannot serve this folder (" + ec.message() + ")");
  root_ = root.string();
}

HttpReply StaticFiles::get(const std::string& method, const std::string& path) const {
  namespace fs = std::filesystem;
  if (!has_ui()) {
    if (path == "/") return text_reply("headscope API is running; the web UI was not built (see web/README.md).\n");
    return not_found(method, path);
  }
  if (has_dot_dot_segment(path))
    return Api::error(400, "bad_path", "the path \"" + printable(path) + "\" climbs out of the UI's folder with ..");
  std::error_code ec;
  fs::path file = fs::path(root_) / fs::path(path.substr(1));
  if (path.back() == '/' || fs::is_directory(file, ec)) file /= "index.html";
  // The real file: a link inside the folder that points outside it is not served.
  const fs::path real = fs::canonical(file, ec);
  const std::string real_s = real.string();
  if (ec || real_s.compare(0, root_.size(), root_) != 0 ||
      (real_s.size() > root_.size() && real_s[root_.size()] != '/') || !fs::is_regular_file(real, ec))
    return not_found(method, path);
  std::ifstream in(real, std::ios::binary);
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return Api::error(500, "internal_error", "cannot read " + printable(path));
  return {200, std::string(content_type_of(real_s)), std::move(body), {}};
}

}  // namespace headscope::server
