#pragma once
// Reading JSON documents with one message style: every loader (topologies, plans, calibration
// overlays, decision tables, fusion and candidate files) reports a bad field as
//
//   SOURCE: PATH: must be an object, not an array
//   SOURCE: PATH.key: missing
//   SOURCE: PATH.key: unknown field (expected a, b, c)
//
// with PATH in the document's own notation (devices[2].id, ops[1].dst.count), left out for the document
// itself ("SOURCE: must be an object, not an array"). JsonField carries a value and its path; the free functions serve
// loaders that keep their own (value, path) pairs.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace artune {

namespace json_reader {

/// "a number", "a string", "a boolean", "null", "an array", "an object".
std::string describe(const nlohmann::json& value);
/// "PATH.key" ("key" at the document's top level, where PATH is empty).
std::string member_path(std::string_view path, std::string_view key);
/// "PATH[i]".
std::string index_path(std::string_view path, std::size_t index);
/// "must be an object, not an array".
std::string type_error(std::string_view expected, const nlohmann::json& value);
/// "SOURCE: PATH: reason" ("SOURCE: reason" for the document itself).
std::string message(std::string_view source, std::string_view path, std::string_view reason);
/// Throws InvalidInput with message(source, path, reason).
[[noreturn]] void fail(std::string_view source, std::string_view path, std::string_view reason);
/// InvalidInput unless `value` is of the kind: "must be an object, not an array".
void expect_object(const nlohmann::json& value, std::string_view source, std::string_view path);
void expect_array(const nlohmann::json& value, std::string_view source, std::string_view path);
/// Typed reads ("must be a string, not a number"; integers checked before they are narrowed).
std::string string(const nlohmann::json& value, std::string_view source, std::string_view path);
double number(const nlohmann::json& value, std::string_view source, std::string_view path);
bool boolean(const nlohmann::json& value, std::string_view source, std::string_view path);
std::int64_t integer(const nlohmann::json& value, std::string_view source, std::string_view path);
std::uint64_t unsigned_integer(const nlohmann::json& value, std::string_view source, std::string_view path);
/// An integer in [lo, hi]: "must be between 0 and 255 (got 4294967297)".
std::int64_t integer_in(const nlohmann::json& value, std::string_view source, std::string_view path, std::int64_t lo,
                        std::int64_t hi);
/// The required member `key` of an object ("PATH.key: missing").
const nlohmann::json& required(const nlohmann::json& object, std::string_view source, std::string_view path,
                               std::string_view key);
/// Rejects members outside `allowed` ("PATH.key: unknown field (expected a, b)"), so that a typo such as
/// "bandwith" is not silently ignored; "comment" and keys starting with '_' are free.
void allow_keys(const nlohmann::json& object, std::string_view source, std::string_view path,
                std::initializer_list<std::string_view> allowed);
/// Keys every document may carry without meaning: "comment" and any key starting with '_'.
bool is_free_key(std::string_view key);

}  // namespace json_reader

/// A JSON value and the path that names it in messages (the path-tracking view of json_reader).
class JsonField {
 public:
  /// The document read from `source`: a file name, or "file: a.b" for a sub-document read on its own (its
  /// members then read "file: a.b.key").
  JsonField(const nlohmann::json& document, std::string_view source);

  const nlohmann::json& value() const { return value_; }
  /// "a.b[2]" ("" for the document itself).
  const std::string& path() const { return path_; }
  /// "SOURCE: a.b[2]" as messages name it.
  std::string where() const;

  /// Throws InvalidInput "SOURCE: PATH: reason".
  [[noreturn]] void fail(std::string_view reason) const { json_reader::fail(source_, path_, reason); }
  /// The member `key` of an object (required).
  JsonField at(std::string_view key) const;
  /// True when the value is an object with `key`.
  bool has(std::string_view key) const;
  /// Element `i` of an array.
  JsonField operator[](std::size_t i) const;
  /// Fails unless the value is an object.
  void expect_object() const { json_reader::expect_object(value_, source_, path_); }
  /// The array's size (fails when not an array).
  std::size_t array_size() const;
  /// Fails unless an object whose keys are all in `allowed` (or free, see json_reader::is_free_key).
  void allow_keys(std::initializer_list<std::string_view> allowed) const;

  std::string str() const { return json_reader::string(value_, source_, path_); }
  double num() const { return json_reader::number(value_, source_, path_); }
  bool boolean() const { return json_reader::boolean(value_, source_, path_); }
  std::int64_t integer() const { return json_reader::integer(value_, source_, path_); }
  std::uint64_t unsigned_integer() const { return json_reader::unsigned_integer(value_, source_, path_); }
  /// An integer in [lo, hi], checked before it is narrowed (4294967297 must not run as 1).
  int int_in(int lo, int hi) const { return static_cast<int>(json_reader::integer_in(value_, source_, path_, lo, hi)); }

 private:
  JsonField(const nlohmann::json& value, std::string source, std::string path)
      : value_(value), source_(std::move(source)), path_(std::move(path)) {}

  const nlohmann::json& value_;
  std::string source_;
  std::string path_;
};

}  // namespace artune
