#include "support/json_schema.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/error.hpp"

namespace tiletune {
namespace {

using nlohmann::json;

// Keywords of JSON Schema that this validator does not implement. A schema using one is refused
// rather than silently half-checked: a schema author would otherwise believe it is enforced.
const char* const kUnsupported[] = {
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf",    "uniqueItems",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependencies",
    "dependentRequired", "dependentSchemas", "allOf",      "not",           "if",
    "then",        "else",             "contains",         "prefixItems",   "additionalItems",
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef",
};

// Deep enough for any real document; stops a schema whose $ref loops without consuming input.
constexpr int kMaxDepth = 256;

std::string type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "unknown";
  }
}

// Only values parsed as integers count as "integer": tiletune's readers call get<int>() and a
// 4.0 tile size is more likely a bug than intent.
bool has_type(const json& v, const std::string& type) {
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_number_integer();
  return type_of(v) == type;
}

// Short rendering of a value for messages: long documents would drown the line.
std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

// RFC 6901: '~' and '/' in a member name are escaped.
std::string child(const std::string& ptr, const std::string& key) {
  std::string out = ptr + "/";
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::size_t utf8_length(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // count every byte that starts a code point
  return n;
}

// Numbers compare exactly when both are integers, as doubles otherwise.
int compare(const json& a, const json& b) {
  if (a.is_number_integer() && b.is_number_integer()) {
    if (a.is_number_unsigned() || b.is_number_unsigned()) {
      auto x = a.get<double>(), y = b.get<double>();
      return x < y ? -1 : x > y;
    }
    auto x = a.get<std::int64_t>(), y = b.get<std::int64_t>();
    return x < y ? -1 : x > y;
  }
  auto x = a.get<double>(), y = b.get<double>();
  return x < y ? -1 : x > y;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  void check(const json& schema, const json& doc, const std::string& ptr, int depth,
             std::vector<std::string>& errors) {
    if (depth > kMaxDepth) bad_schema("nesting deeper than " + std::to_string(kMaxDepth) + " (a $ref loop?)");
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) errors.push_back(where(ptr) + ": no value is allowed here");
      return;
    }
    if (!schema.is_object()) bad_schema("a schema must be an object or a boolean, got " + show(schema));
    for (const char* k : kUnsupported)
      if (schema.contains(k)) bad_schema(std::string("unsupported keyword \"") + k + "\"");

    auto add = [&](const std::string& msg) { errors.push_back(where(ptr) + ": " + msg); };

    // Siblings of $ref are applied too (2019-09 semantics): one more schema to check against.
    if (auto it = schema.find("$ref"); it != schema.end()) check(resolve(*it), doc, ptr, depth + 1, errors);

    if (auto it = schema.find("type"); it != schema.end()) check_type(*it, doc, add);
    if (auto it = schema.find("enum"); it != schema.end()) {
      if (!it->is_array()) bad_schema("\"enum\" must be an array");
      bool found = false;
      for (const auto& e : *it) found = found || e == doc;
      if (!found) add("value " + show(doc) + " is not one of " + show(*it));
    }
    if (auto it = schema.find("const"); it != schema.end())
      if (*it != doc) add("expected " + show(*it) + ", got " + show(doc));

    if (doc.is_number()) check_number(schema, doc, add);
    if (doc.is_string()) check_string(schema, doc.get_ref<const std::string&>(), add);
    if (doc.is_array()) check_array(schema, doc, ptr, depth, errors, add);
    if (doc.is_object()) check_object(schema, doc, ptr, depth, errors, add);

    if (auto it = schema.find("anyOf"); it != schema.end()) {
      auto branches = branch_errors(*it, doc, ptr, depth, "anyOf");
      std::size_t passing = 0;
      for (const auto& b : branches) passing += b.empty();
      if (passing == 0) add("matches none of the anyOf schemas" + summary(branches));
    }
    if (auto it = schema.find("oneOf"); it != schema.end()) {
      auto branches = branch_errors(*it, doc, ptr, depth, "oneOf");
      std::size_t passing = 0;
      for (const auto& b : branches) passing += b.empty();
      if (passing == 0) add("matches none of the oneOf schemas" + summary(branches));
      if (passing > 1) add("matches " + std::to_string(passing) + " of the oneOf schemas, expected exactly 1");
    }
  }

 private:
  [[noreturn]] static void bad_schema(const std::string& what) {
    throw_error(ErrorKind::Internal, "json schema: " + what);
  }

  // The root's pointer is "", which would print as a bare ": ..." line; "/" reads better and
  // tiletune's schemas never use an empty member name.
  static std::string where(const std::string& ptr) { return ptr.empty() ? "/" : ptr; }

  // Only local references ("#", "#/$defs/x", "#/definitions/x", any "#/..." pointer) exist in
  // tiletune's schemas; remote ones would need a loader.
  const json& resolve(const json& ref) {
    if (!ref.is_string()) bad_schema("\"$ref\" must be a string");
    const auto& s = ref.get_ref<const std::string&>();
    if (s.empty() || s[0] != '#') bad_schema("only local $ref (\"#/...\") is supported, got \"" + s + "\"");
    try {
      json::json_pointer p(s.substr(1));
      if (root_.contains(p)) return root_.at(p);
    } catch (const json::exception&) {
    }
    bad_schema("$ref \"" + s + "\" does not resolve");
  }

  template <class Add>
  void check_type(const json& type, const json& doc, Add& add) {
    std::vector<std::string> names;
    if (type.is_string()) names.push_back(type.get<std::string>());
    else if (type.is_array())
      for (const auto& t : type) names.push_back(t.is_string() ? t.get<std::string>() : "?");
    else bad_schema("\"type\" must be a string or an array of strings");
    for (const auto& n : names)
      if (has_type(doc, n)) return;
    std::string want;
    for (std::size_t i = 0; i < names.size(); ++i) want += (i ? " or " : "") + names[i];
    add("expected " + want + ", got " + type_of(doc));
  }

  template <class Add>
  void check_number(const json& schema, const json& doc, Add& add) {
    if (auto it = schema.find("minimum"); it != schema.end() && compare(doc, *it) < 0)
      add(show(doc) + " is less than minimum " + show(*it));
    if (auto it = schema.find("maximum"); it != schema.end() && compare(doc, *it) > 0)
      add(show(doc) + " is greater than maximum " + show(*it));
  }

  template <class Add>
  void check_string(const json& schema, const std::string& s, Add& add) {
    if (auto it = schema.find("minLength"); it != schema.end() && utf8_length(s) < it->get<std::size_t>())
      add("length " + std::to_string(utf8_length(s)) + " is less than minLength " + show(*it));
    if (auto it = schema.find("maxLength"); it != schema.end() && utf8_length(s) > it->get<std::size_t>())
      add("length " + std::to_string(utf8_length(s)) + " is more than maxLength " + show(*it));
    if (auto it = schema.find("pattern"); it != schema.end())
      if (!std::regex_search(s, regex(*it)))  // JSON Schema patterns are not anchored
        add(show(json(s)) + " does not match pattern " + it->get<std::string>());
  }

  template <class Add>
  void check_array(const json& schema, const json& doc, const std::string& ptr, int depth,
                   std::vector<std::string>& errors, Add& add) {
    if (auto it = schema.find("minItems"); it != schema.end() && doc.size() < it->get<std::size_t>())
      add("has " + std::to_string(doc.size()) + " items, fewer than minItems " + show(*it));
    if (auto it = schema.find("maxItems"); it != schema.end() && doc.size() > it->get<std::size_t>())
      add("has " + std::to_string(doc.size()) + " items, more than maxItems " + show(*it));
    if (auto it = schema.find("items"); it != schema.end()) {
      if (it->is_array()) bad_schema("tuple-form \"items\" is not supported");
      for (std::size_t i = 0; i < doc.size(); ++i)
        check(*it, doc[i], ptr + "/" + std::to_string(i), depth + 1, errors);
    }
  }

  template <class Add>
  void check_object(const json& schema, const json& doc, const std::string& ptr, int depth,
                    std::vector<std::string>& errors, Add& add) {
    static const json kNoProperties = json::object();
    auto pit = schema.find("properties");
    const json& props = pit != schema.end() ? *pit : kNoProperties;
    if (!props.is_object()) bad_schema("\"properties\" must be an object");
    if (auto it = schema.find("required"); it != schema.end())
      for (const auto& name : *it)
        if (!doc.contains(name.get<std::string>()))
          add("missing required property \"" + name.get<std::string>() + "\"");
    auto extra = schema.find("additionalProperties");
    for (const auto& [key, value] : doc.items()) {
      if (auto p = props.find(key); p != props.end()) {
        check(*p, value, child(ptr, key), depth + 1, errors);
      } else if (extra != schema.end()) {
        if (extra->is_boolean() && !extra->get<bool>())
          errors.push_back(child(ptr, key) + ": additional property \"" + key + "\" is not allowed");
        else check(*extra, value, child(ptr, key), depth + 1, errors);
      }
    }
  }

  std::vector<std::vector<std::string>> branch_errors(const json& list, const json& doc,
                                                      const std::string& ptr, int depth, const char* kw) {
    if (!list.is_array() || list.empty()) bad_schema(std::string("\"") + kw + "\" must be a non-empty array");
    std::vector<std::vector<std::string>> out;
    for (const auto& s : list) {
      out.emplace_back();
      check(s, doc, ptr, depth + 1, out.back());
    }
    return out;
  }

  // Why each branch failed, first reason only: enough to see which branch was meant.
  static std::string summary(const std::vector<std::vector<std::string>>& branches) {
    std::string s = " (";
    for (std::size_t i = 0; i < branches.size(); ++i)
      s += (i ? "; " : "") + std::string("[") + std::to_string(i) + "] " +
           (branches[i].empty() ? "ok" : branches[i].front());
    return s + ")";
  }

  const std::regex& regex(const json& pattern) {
    if (!pattern.is_string()) bad_schema("\"pattern\" must be a string");
    const auto& p = pattern.get_ref<const std::string&>();
    auto it = regexes_.find(p);
    if (it != regexes_.end()) return it->second;
    try {
      return regexes_.emplace(p, std::regex(p, std::regex::ECMAScript)).first->second;
    } catch (const std::regex_error& e) {
      bad_schema("bad pattern \"" + p + "\": " + e.what());
    }
  }

  const json& root_;
  std::map<std::string, std::regex> regexes_;  // compiled once per validate_json call
};

}  // namespace

std::vector<std::string> validate_json(const nlohmann::json& schema, const nlohmann::json& doc) {
  std::vector<std::string> errors;
  Validator(schema).check(schema, doc, "", 0, errors);
  return errors;
}

}  // namespace tiletune
