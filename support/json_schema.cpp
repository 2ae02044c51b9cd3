// JSON Schema validation through valijson (Debian's libvalijson-dev): draft 7 semantics, which
// cover every keyword tiletune's schemas use ($defs is reached by JSON-pointer $refs).
#include "support/json_schema.hpp"

#include <nlohmann/json.hpp>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "support/error.hpp"

namespace tiletune {

namespace {

//! A JSON pointer from valijson's context ("<root>", "[stages]", "[0]"), escaping ~ and /.
std::string pointer_of(const std::vector<std::string>& context) {
  std::string out;
  for (std::size_t i = 1; i < context.size(); ++i) {
    const std::string& part = context[i];
    std::string name =
        part.size() >= 2 && part.front() == '[' && part.back() == ']' ? part.substr(1, part.size() - 2) : part;
    out += '/';
    for (char c : name) out += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  }
  return out.empty() ? "/" : out;
}

//! valijson also reports each enclosing schema that failed because a part of it did; those
//! lines repeat what the innermost error says.
bool is_enclosing(const std::string& description) {
  return description.rfind("Failed to validate item #", 0) == 0 ||
         description.rfind("Failed to validate against schema associated with property name", 0) == 0 ||
         description.rfind("Failed to validate against additional properties schema", 0) == 0 ||
         description.rfind("Failed to validate against child schema", 0) == 0;
}

//! The value at `pointer` in `doc`, cut short: what the error refers to.
std::string excerpt(const nlohmann::json& doc, const std::string& pointer) {
  const nlohmann::json* value = &doc;
  if (pointer != "/") {
    auto at = nlohmann::json::json_pointer(pointer);
    if (!doc.contains(at)) return "nothing";
    value = &doc.at(at);
  }
  std::string text = value->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

}  // namespace

struct JsonSchema::Compiled {
  valijson::Schema schema;
};

JsonSchema::JsonSchema(const nlohmann::json& schema) {
  auto compiled = std::make_shared<Compiled>();
  try {
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(schema);
    parser.populateSchema(adapter, compiled->schema);
  } catch (const std::exception& e) {
    throw_error(ErrorKind::Internal, std::string("invalid JSON Schema: ") + e.what());
  }
  compiled_ = std::move(compiled);
}

std::vector<std::string> JsonSchema::validate(const nlohmann::json& doc) const {
  // A Validator caches compiled patterns while it validates: one per thread, the schema shared.
  thread_local valijson::Validator validator(valijson::Validator::kStrongTypes);
  valijson::adapters::NlohmannJsonAdapter target(doc);
  valijson::ValidationResults results;
  try {
    if (validator.validate(compiled_->schema, target, &results)) return {};
  } catch (const std::exception& e) {  // a pattern that does not compile is the schema's fault
    throw_error(ErrorKind::Internal, std::string("invalid JSON Schema: ") + e.what());
  }
  std::vector<std::string> all, innermost;
  valijson::ValidationResults::Error error;
  while (results.popError(error)) {
    std::string pointer = pointer_of(error.context);
    std::string line = pointer + ": " + error.description + " (got " + excerpt(doc, pointer) + ")";
    all.push_back(line);
    if (!is_enclosing(error.description)) innermost.push_back(line);
  }
  return innermost.empty() ? all : innermost;
}

std::vector<std::string> validate_json(const nlohmann::json& schema, const nlohmann::json& doc) {
  return JsonSchema(schema).validate(doc);
}

}  // namespace tiletune
