#include "artune/core/json_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "artune/core/error.hpp"

namespace artune {

namespace json_reader {

std::string type_error(std::string_view expected, const nlohmann::json& value) {
  return fmt::format("must be {}, not {}", expected, describe(value));
}

std::string message(std::string_view source, std::string_view path, std::string_view reason) {
  if (path.empty()) return fmt::format("{}: {}", source, reason);
  if (source.empty()) return fmt::format("{}: {}", path, reason);
  return fmt::format("{}: {}: {}", source, path, reason);
}

std::string describe(const nlohmann::json& value) {
  if (value.is_number()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_null()) return "null";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return value.type_name();
}

std::string member_path(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string index_path(std::string_view path, std::size_t index) { return fmt::format("{}[{}]", path, index); }

void fail(std::string_view source, std::string_view path, std::string_view reason) {
  throw InvalidInput(message(source, path, reason));
}

void expect_object(const nlohmann::json& value, std::string_view source, std::string_view path) {
  if (!value.is_object()) fail(source, path, type_error("an object", value));
}

void expect_array(const nlohmann::json& value, std::string_view source, std::string_view path) {
  if (!value.is_array()) fail(source, path, type_error("an array", value));
}

std::string string(const nlohmann::json& value, std::string_view source, std::string_view path) {
  if (!value.is_string()) fail(source, path, type_error("a string", value));
  return value.get<std::string>();
}

double number(const nlohmann::json& value, std::string_view source, std::string_view path) {
  if (!value.is_number()) fail(source, path, type_error("a number", value));
  return value.get<double>();
}

bool boolean(const nlohmann::json& value, std::string_view source, std::string_view path) {
  if (!value.is_boolean()) fail(source, path, type_error("true or false", value));
  return value.get<bool>();
}

std::int64_t integer(const nlohmann::json& value, std::string_view source, std::string_view path) {
  if (!value.is_number_integer()) fail(source, path, type_error("an integer", value));
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    fail(source, path, fmt::format("{} is out of range", value.get<std::uint64_t>()));
  }
  return value.get<std::int64_t>();
}

std::uint64_t unsigned_integer(const nlohmann::json& value, std::string_view source, std::string_view path) {
  if (!value.is_number_integer()) fail(source, path, type_error("a non-negative integer", value));
  if (!value.is_number_unsigned() && value.get<std::int64_t>() < 0) {
    fail(source, path, fmt::format("must be a non-negative integer, not {}", value.get<std::int64_t>()));
  }
  return value.get<std::uint64_t>();
}

std::int64_t integer_in(const nlohmann::json& value, std::string_view source, std::string_view path, std::int64_t lo,
                        std::int64_t hi) {
  const std::int64_t x = integer(value, source, path);
  if (x < lo || x > hi) fail(source, path, fmt::format("must be between {} and {} (got {})", lo, hi, x));
  return x;
}

const nlohmann::json& required(const nlohmann::json& object, std::string_view source, std::string_view path,
                               std::string_view key) {
  expect_object(object, source, path);
  const auto it = object.find(key);
  if (it == object.end()) fail(source, member_path(path, key), "missing");
  return *it;
}

bool is_free_key(std::string_view key) { return key == "comment" || (!key.empty() && key.front() == '_'); }

void allow_keys(const nlohmann::json& object, std::string_view source, std::string_view path,
                std::initializer_list<std::string_view> allowed) {
  expect_object(object, source, path);
  for (const auto& [key, value] : object.items()) {
    if (is_free_key(key) || std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string names;
    for (const std::string_view a : allowed) names += fmt::format("{}{}", names.empty() ? "" : ", ", a);
    fail(source, member_path(path, key), fmt::format("unknown field (expected {})", names));
  }
}

}  // namespace json_reader

JsonField::JsonField(const nlohmann::json& document, std::string_view source) : value_(document) {
  const std::size_t colon = source.find(": ");
  source_ = std::string(source.substr(0, colon));
  if (colon != std::string_view::npos) path_ = std::string(source.substr(colon + 2));
}

std::string JsonField::where() const { return path_.empty() ? source_ : fmt::format("{}: {}", source_, path_); }

JsonField JsonField::at(std::string_view key) const {
  return JsonField(json_reader::required(value_, source_, path_, key), source_, json_reader::member_path(path_, key));
}

bool JsonField::has(std::string_view key) const { return value_.is_object() && value_.contains(key); }

JsonField JsonField::operator[](std::size_t i) const {
  json_reader::expect_array(value_, source_, path_);
  return JsonField(value_.at(i), source_, json_reader::index_path(path_, i));
}

std::size_t JsonField::array_size() const {
  json_reader::expect_array(value_, source_, path_);
  return value_.size();
}

void JsonField::allow_keys(std::initializer_list<std::string_view> allowed) const {
  json_reader::allow_keys(value_, source_, path_, allowed);
}

}  // namespace artune
