// server/schemas.hpp
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace tiletune::server {

//! Validates a request body against $defs/<definition> of schemas/api.schema.json (compiled
//! in); Error(InvalidInput) listing each violation with its JSON pointer.
void validate_body(const std::string& definition, const nlohmann::json& body);

//! The compiled-in schemas/ files by name ("api.schema.json", "openapi.yaml", ...).
const std::string& schema_file(const std::string& name);

}  // namespace tiletune::server
