// Record <-> the exported JSON form (schemas/record.schema.json), Record::median_s, the check
// every store applies to a record, and the stores' clock.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "db/store.hpp"
#include "support/error.hpp"
#include "support/stats.hpp"

namespace tiletune::db {

using nlohmann::json;

std::int64_t now_unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

void check_record(const Record& r) {
  if (r.ok() && r.times_s.empty())
    throw_error(ErrorKind::InvalidInput, "add_record: a successful record needs at least one time");
}

void check_times(const std::vector<double>& times_s) {
  if (times_s.empty()) throw_error(ErrorKind::InvalidInput, "retime: a successful record needs at least one time");
  for (double t : times_s)
    if (!(t > 0) || !std::isfinite(t)) throw_error(ErrorKind::InvalidInput, "retime: a time is not positive");
}

double time_of(const std::vector<double>& times_s, const std::string& measure_params_json) {
  // Most records have one session: no parameters to parse.
  static const std::string quoted_key = std::string("\"") + kSessionsParam + "\"";
  if (measure_params_json.find(quoted_key) == std::string::npos) return median_of(times_s);
  const json params = json::parse(measure_params_json, nullptr, false);
  const json* sessions = params.is_object() && params.contains(kSessionsParam) ? &params[kSessionsParam] : nullptr;
  std::size_t total = 0;
  bool counts = sessions && sessions->is_array() && !sessions->empty();
  for (std::size_t i = 0; counts && i < sessions->size(); ++i) {
    counts = (*sessions)[i].is_number_unsigned() && (*sessions)[i].get<std::size_t>() > 0;
    if (counts) total += (*sessions)[i].get<std::size_t>();
  }
  // Counts that do not split these times (written by hand, or times cut since): all as one.
  if (!counts || total != times_s.size()) return median_of(times_s);
  double log_sum = 0;
  auto at = times_s.begin();
  for (const json& n : *sessions) {
    const auto end = at + static_cast<std::ptrdiff_t>(n.get<std::size_t>());
    log_sum += std::log(median_of(std::vector<double>(at, end)));
    at = end;
  }
  return std::exp(log_sum / static_cast<double>(sessions->size()));
}

double Record::median_s() const {
  if (!ok() || times_s.empty()) return std::numeric_limits<double>::infinity();
  return time_of(times_s, measure_params_json);
}

double Record::spread() const {
  if (!ok() || times_s.size() < 2) return 0;
  std::vector<double> t = times_s;
  std::sort(t.begin(), t.end());
  auto at = [&](double q) { return t[static_cast<size_t>(q * static_cast<double>(t.size() - 1) + 0.5)]; };
  return (at(0.75) - at(0.25)) / median_s();
}

namespace {

[[noreturn]] void bad(const std::string& what, const std::string& of = "record") {
  throw_error(ErrorKind::InvalidInput, of + ": " + what);
}

// The stored config and measure params are JSON text; the export embeds them as objects.
json embed(const std::string& text, const char* field) {
  if (text.empty()) return json::object();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) bad(std::string(field) + " is not a JSON object");
  return j;
}

// The member `name` of `obj`, which must pass `ok`; `path` prefixes the name in messages.
const json& member(const json& obj, const std::string& path, const char* name, bool (*ok)(const json&),
                   const char* expected, const std::string& of = "record") {
  auto it = obj.find(name);
  if (it == obj.end()) bad("missing field \"" + path + name + "\"", of);
  if (!ok(*it)) bad("field \"" + path + name + "\" must be " + expected + ", got " + it->type_name(), of);
  return *it;
}

bool is_string(const json& v) { return v.is_string(); }
bool is_integer(const json& v) { return v.is_number_integer(); }
bool is_object(const json& v) { return v.is_object(); }
bool is_array(const json& v) { return v.is_array(); }
bool is_string_or_null(const json& v) { return v.is_string() || v.is_null(); }
bool is_number_or_null(const json& v) { return v.is_number() || v.is_null(); }

std::string string_member(const json& obj, const char* name, const std::string& of = "record") {
  return member(obj, "", name, is_string, "a string", of).get<std::string>();
}

//! An optional string member: "" when absent (rows written before the field existed).
std::string optional_string(const json& obj, const char* name, const std::string& of) {
  return obj.contains(name) ? string_member(obj, name, of) : "";
}

void require_object(const json& j, const std::string& of) {
  if (!j.is_object()) bad(std::string("expected a JSON object, got ") + j.type_name(), of);
}

std::int64_t int_member(const json& obj, const char* name) {
  return member(obj, "", name, is_integer, "an integer").get<std::int64_t>();
}

}  // namespace

json record_to_json(const Record& r) {
  json result = {
      {"times_s", r.times_s},
      {"median_s", r.ok() && !r.times_s.empty() ? json(r.median_s()) : json(nullptr)},
      {"error_class", r.ok() ? json(nullptr) : json(r.error_class)},
      {"error_message", r.error_message},
  };
  json j = {
      {"id", r.id},
      {"workload_key", r.workload_key},
      {"target_key", r.target_key},
      {"config_key", r.config_key},
      {"config", embed(r.config_json, "config_json")},
      {"result", std::move(result)},
      {"measure_params", embed(r.measure_params_json, "measure_params_json")},
      {"tool_version", r.tool_version},
      {"created_unix_ms", r.created_unix_ms},
  };
  return j;
}

Record record_from_text(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) bad("not valid JSON");
  return record_from_json(j);
}

Record record_from_json(const json& j) {
  if (!j.is_object()) bad(std::string("expected a JSON object, got ") + j.type_name());

  Record r;
  r.id = int_member(j, "id");
  r.workload_key = string_member(j, "workload_key");
  r.target_key = string_member(j, "target_key");
  r.config_key = string_member(j, "config_key");
  r.config_json = member(j, "", "config", is_object, "an object").dump();  // keys sorted: canonical
  r.measure_params_json = member(j, "", "measure_params", is_object, "an object").dump();
  r.tool_version = string_member(j, "tool_version");
  r.created_unix_ms = int_member(j, "created_unix_ms");

  const json& res = member(j, "", "result", is_object, "an object");
  for (const auto& t : member(res, "result.", "times_s", is_array, "an array")) {
    if (!t.is_number() || t.get<double>() < 0) bad("result.times_s must hold non-negative numbers, got " + t.dump());
    r.times_s.push_back(t.get<double>());
  }
  const json& cls = member(res, "result.", "error_class", is_string_or_null, "a string or null");
  if (cls.is_string()) {
    r.error_class = cls.get<std::string>();
    if (r.error_class.empty()) bad("result.error_class must be null for success, not \"\"");
  }
  r.error_message = member(res, "result.", "error_message", is_string, "a string").get<std::string>();
  // median_s is derived from times_s: checked for type, never trusted.
  member(res, "result.", "median_s", is_number_or_null, "a number or null");
  if (r.ok() && r.times_s.empty()) bad("a successful result needs at least one time in result.times_s");
  return r;
}

// Workload and target rows travel with their JSON-valued columns as strings, as stored.
json workload_to_json(const WorkloadRow& w) {
  return {{"key", w.key},
          {"op_name", w.op_name},
          {"canonical_text", w.canonical_text},
          {"sizes_json", w.sizes_json},
          {"op_text", w.op_text}};
}

WorkloadRow workload_from_json(const json& j) {
  require_object(j, "workload");
  return {string_member(j, "key", "workload"), string_member(j, "op_name", "workload"),
          string_member(j, "canonical_text", "workload"), string_member(j, "sizes_json", "workload"),
          optional_string(j, "op_text", "workload")};
}

json target_to_json(const TargetRow& t) {
  return {{"key", t.key},
          {"backend", t.backend},
          {"family", t.family},
          {"fingerprint_json", t.fingerprint_json},
          {"traits_json", t.traits_json}};
}

TargetRow target_from_json(const json& j) {
  require_object(j, "target");
  return {string_member(j, "key", "target"), string_member(j, "backend", "target"),
          string_member(j, "family", "target"), string_member(j, "fingerprint_json", "target"),
          optional_string(j, "traits_json", "target")};
}

}  // namespace tiletune::db
