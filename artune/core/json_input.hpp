#pragma once
// Parsing user-supplied JSON into nlohmann::json with one-line errors that name
// the source: every nlohmann exception (syntax errors, numbers that overflow a
// double such as 1e400, invalid UTF-8) becomes InvalidInput.

#include <string_view>

#include <nlohmann/json.hpp>

namespace artune {

/// Parses `text`; InvalidInput reads "SOURCE: line L, column C: malformed JSON: reason" (or
/// "SOURCE: malformed JSON: reason" where the parser gives no position).
nlohmann::json parse_json_input(std::string_view text, std::string_view source);

/// read_input_file then parse_json_input: the file's JSON, errors naming `what` or the path.
nlohmann::json read_json_input(const std::string& path, std::string_view what);

}  // namespace artune
