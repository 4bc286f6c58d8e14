#pragma once
// The tuner's loaders read JSON through core/json_reader.hpp (one message style for every loader:
// "t.json: ranges[2].plan.spec: must be a string, not a number").

#include "artune/core/json_reader.hpp"

namespace artune::tuner_detail {

using Field = JsonField;

}  // namespace artune::tuner_detail
