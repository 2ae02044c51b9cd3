// support/json_schema.hpp
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tiletune {

//! Validates a JSON document against a JSON Schema (the subset tiletune's schemas use: type,
//! properties, required, additionalProperties, items, enum, const, minimum, maximum,
//! minItems, maxItems, minLength, maxLength, pattern, $ref to #/$defs/..., oneOf, anyOf).
//! Returns one line per violation, each starting with a JSON pointer; empty means valid.
std::vector<std::string> validate_json(const nlohmann::json& schema, const nlohmann::json& doc);

}  // namespace tiletune
