#pragma once
// Internal helpers for reading JSON with error messages that name the file and
// the field path ("t.json: ranges[2].plan.spec: expected a string").

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace artune::tuner_detail {

/// A JSON value and the path that names it in messages.
struct Field {
  const nlohmann::json& value;
  std::string path;  ///< "source: a.b[2]" (just "source" for the document itself)
  bool root = true;  ///< the document itself: its members read "source: key", not "source.key"

  /// Throws InvalidInput "path: reason".
  [[noreturn]] void fail(std::string_view reason) const {
    throw InvalidInput(fmt::format("{}: {}", path, reason));
  }
  /// The member `key` of an object (required).
  Field at(std::string_view key) const {
    if (!value.is_object()) fail("expected an object");
    const auto it = value.find(std::string(key));
    if (it == value.end()) throw InvalidInput(fmt::format("{}: missing", child(key)));
    return Field{*it, child(key), false};
  }
  /// True when the object has `key`.
  bool has(std::string_view key) const { return value.is_object() && value.contains(std::string(key)); }
  /// Element `i` of an array.
  Field operator[](std::size_t i) const {
    return Field{value.at(i), top() ? fmt::format("{}: [{}]", path, i) : fmt::format("{}[{}]", path, i), false};
  }
  /// The path of member `key` in messages.
  std::string child(std::string_view key) const {
    return top() ? fmt::format("{}: {}", path, key) : fmt::format("{}.{}", path, key);
  }
  /// A document's top level: a root whose source is a bare file name, not already "file: a.b"
  /// (sub-documents such as a table's plan are read with the path that names them as source).
  bool top() const { return root && path.find(": ") == std::string::npos; }
  /// The array's size (fails when not an array).
  std::size_t array_size() const {
    if (!value.is_array()) fail("expected an array");
    return value.size();
  }
  std::string str() const {
    if (!value.is_string()) fail("expected a string");
    return value.get<std::string>();
  }
  double num() const {
    if (!value.is_number()) fail("expected a number");
    return value.get<double>();
  }
  std::int64_t integer() const {
    if (!value.is_number_integer()) fail("expected an integer");
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(fmt::format("{} is out of range", value.get<std::uint64_t>()));
    }
    return value.get<std::int64_t>();
  }
  /// An integer in [lo, hi], checked before it is narrowed (4294967297 must not run as 1).
  int int_in(int lo, int hi) const {
    const std::int64_t x = integer();
    if (x < lo || x > hi) fail(fmt::format("{} is not in {}..{}", x, lo, hi));
    return static_cast<int>(x);
  }
  std::uint64_t unsigned_integer() const {
    if (!value.is_number_integer() || (value.is_number_integer() && !value.is_number_unsigned() && value.get<std::int64_t>() < 0)) {
      fail("expected a non-negative integer");
    }
    return value.get<std::uint64_t>();
  }
};

}  // namespace artune::tuner_detail
