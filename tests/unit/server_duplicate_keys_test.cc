// A request body that gives one key twice in the same object is refused with 400 naming the key,
// at any depth: nlohmann::json would keep the last value and drop the first without a word, and
// docs/api.md promises that nothing in a request is silently ignored.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/api.h"
#include "server/run_cache.h"
#include "test_support.h"

namespace {

using headscope::server::Api;
using headscope::server::HttpReply;
using headscope::server::RunCache;
using nlohmann::json;

struct Server {
  RunCache cache{headscope::testing::default_model(), 2, size_t{256} << 20, 512, {}};
  Api api{headscope::testing::default_model(), cache};
};

std::string code_of(const HttpReply& r) { return json::parse(r.body)["error"]["code"].get<std::string>(); }
std::string message_of(const HttpReply& r) { return json::parse(r.body)["error"]["message"].get<std::string>(); }

TEST(ServerDuplicateKeys, AKeyGivenTwiceIsA400NamingIt) {
  Server s;
  for (const char* body :
       {R"({"text": "a", "text": "b"})", R"({"text": "a", "layer": 1, "layer": 2})",
        R"({"text": "a", "extra": {"k": 1, "k": 2}})", R"({"text": "a", "extra": [{"k": 1, "k": 1}]})"}) {
    const HttpReply r = s.api.attention(body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(code_of(r), "duplicate_field") << body << " " << r.body;
    const std::string key = std::string(body).find("\"k\"") != std::string::npos   ? "\"k\""
                            : std::string(body).find("layer") != std::string::npos ? "\"layer\""
                                                                                   : "\"text\"";
    EXPECT_NE(message_of(r).find(key), std::string::npos) << r.body;
  }
  EXPECT_EQ(s.cache.runs_computed(), 0);  // refused while parsing, before any run
}

TEST(ServerDuplicateKeys, TheSameKeyInDifferentObjectsIsNotADuplicate) {
  Server s;
  // Parsed without complaint, then refused for the field no request has (not as a duplicate).
  const HttpReply r = s.api.run(R"({"text": "a", "extra": [{"k": 1}, {"k": 2}], "more": {"text": "b"}})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(code_of(r), "unknown_field") << r.body;
  // And a plain request still runs.
  EXPECT_EQ(s.api.run(R"({"text": "The cat sat on the mat."})").status, 200);
}

}  // namespace
