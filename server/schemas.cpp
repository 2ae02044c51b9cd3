#include "server/schemas.hpp"

#include <map>
#include <mutex>

#include "support/error.hpp"
#include "support/json_schema.hpp"

namespace tiletune::server {

const std::map<std::string, std::string>& embedded_files();  // generated from schemas/

const std::string& schema_file(const std::string& name) {
  auto it = embedded_files().find(name);
  if (it == embedded_files().end()) throw_error(ErrorKind::NotFound, "no schema file '" + name + "'");
  return it->second;
}

void validate_body(const std::string& definition, const nlohmann::json& body) {
  // Each definition is compiled once, on first use; compiled schemas are shared by all threads.
  static const nlohmann::json api = nlohmann::json::parse(schema_file("api.schema.json"));
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const JsonSchema>> compiled;
  std::shared_ptr<const JsonSchema> schema;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = compiled[definition];
    if (!slot)
      slot =
          std::make_shared<JsonSchema>(nlohmann::json{{"$defs", api.at("$defs")}, {"$ref", "#/$defs/" + definition}});
    schema = slot;
  }
  auto errors = schema->validate(body);
  if (errors.empty()) return;
  std::string message = "request body does not match the " + definition + " schema: ";
  for (std::size_t i = 0; i < errors.size() && i < 5; ++i) message += (i ? "; " : "") + errors[i];
  if (errors.size() > 5) message += "; and " + std::to_string(errors.size() - 5) + " more";
  throw_error(ErrorKind::InvalidInput, message);
}

}  // namespace tiletune::server
