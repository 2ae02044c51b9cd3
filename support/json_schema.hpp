// support/json_schema.hpp
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tiletune {

//! A JSON Schema compiled once (valijson, draft-7 semantics: tiletune's schemas use type,
//! properties, required, additionalProperties, items, enum, const, minimum, maximum, minItems,
//! maxItems, minLength, maxLength, pattern, oneOf and $refs to #/$defs/...). Safe to share
//! across threads. Schemas are tiletune's own (schemas/), never a request's: Error(Internal) for
//! one valijson cannot use.
class JsonSchema {
 public:
  explicit JsonSchema(const nlohmann::json& schema);
  //! One line per violation: a JSON pointer, valijson's reason and the value it refers to
  //! (shortened); empty means valid.
  std::vector<std::string> validate(const nlohmann::json& doc) const;

 private:
  struct Compiled;
  std::shared_ptr<const Compiled> compiled_;
};

//! JsonSchema(schema).validate(doc), for a schema used once.
std::vector<std::string> validate_json(const nlohmann::json& schema, const nlohmann::json& doc);

}  // namespace tiletune
