// One JSON reading module: the message style every loader shares.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "artune/core/error.hpp"
#include "artune/core/json_reader.hpp"
#include "tests/test_support.hpp"

using namespace artune;
using nlohmann::json;

namespace {

using artune_test::error_of;

}  // namespace

TEST_CASE("json_reader.messages") {
  const json doc = json::parse(R"({"a": {"b": [1, "x", 4294967297, -1]}, "s": "t", "comment": "free", "_x": 1})");
  const JsonField root(doc, "f.json");
  CHECK(root.at("s").str() == "t");
  CHECK(root.at("a").at("b")[0].int_in(0, 3) == 1);
  CHECK(root.at("a").at("b").array_size() == 4);
  CHECK(root.has("a"));
  CHECK(!root.has("z"));
  CHECK(error_of([&] { root.at("z"); }) == "f.json: z: missing");
  CHECK(error_of([&] { root.at("a").at("z"); }) == "f.json: a.z: missing");
  CHECK(error_of([&] { root.at("a").at("b")[1].integer(); }) == "f.json: a.b[1]: must be an integer, not a string");
  CHECK(error_of([&] { root.at("a").at("b")[2].int_in(0, 255); }) ==
        "f.json: a.b[2]: must be between 0 and 255 (got 4294967297)");
  CHECK(error_of([&] { root.at("a").at("b")[3].unsigned_integer(); }) ==
        "f.json: a.b[3]: must be a non-negative integer, not -1");
  CHECK(error_of([&] { root.at("a").str(); }) == "f.json: a: must be a string, not an object");
  CHECK(error_of([&] { root.at("s").boolean(); }) == "f.json: s: must be true or false, not a string");
  CHECK(error_of([&] { root.at("s").array_size(); }) == "f.json: s: must be an array, not a string");
  CHECK(error_of([&] { root.allow_keys({"a"}); }) == "f.json: s: unknown field (expected a)");
  root.allow_keys({"a", "s"});  // "comment" and "_x" are free
  CHECK(error_of([&] { JsonField(json::array(), "f.json").at("a"); }) == "f.json: must be an object, not an array");
  // A sub-document read on its own keeps the path that names it.
  const JsonField sub(doc["a"], "f.json: a");
  CHECK(error_of([&] { sub.at("z"); }) == "f.json: a.z: missing");
  CHECK(sub.at("b")[0].where() == "f.json: a.b[0]");
  const json big = json::parse("18446744073709551615");
  CHECK(error_of([&] { json_reader::integer(big, "f.json", "n"); }) ==
        "f.json: n: 18446744073709551615 is out of range");
  CHECK(json_reader::describe(json(nullptr)) == "null");
}
