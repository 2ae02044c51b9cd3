#include "ir/schedule.hpp"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <set>

#include "ir/knobs.hpp"
#include "ir/read_strides.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"

namespace tiletune::ir {

OrderEntry split_order_entry(std::string_view entry) {
  const auto dot = entry.rfind('.');
  if (dot == std::string_view::npos) return {entry, {}, false};
  return {entry.substr(0, dot), entry.substr(dot + 1), true};
}

bool OrderEntry::is_level(int n) const {
  char buf[12];
  const auto written = std::to_chars(buf, buf + sizeof buf, n);
  return level == std::string_view(buf, static_cast<size_t>(written.ptr - buf));
}

int OrderEntry::number() const {
  int n = -1;
  const auto read = std::from_chars(level.data(), level.data() + level.size(), n);
  return read.ec == std::errc() && read.ptr == level.data() + level.size() ? n : -1;
}

using nlohmann::json;

namespace {

const Knob* stage_int_knob(const std::string& name) {
  for (const Knob* k : stage_int_knobs())
    if (name == k->name) return k;
  return nullptr;
}

}  // namespace

void StageSchedule::reset() {
  std::string name = std::move(stage);
  *this = StageSchedule();
  stage = std::move(name);
}

bool StageSchedule::has_loop_knobs() const {
  for (const Knob* k : stage_int_knobs())
    if (this->*(k->field) != k->default_value) return true;
  return !tile.empty() || !order.empty() || !vectorize.empty() || fuse_epilogue || !pack.empty();
}

std::string Schedule::to_json() const { return to_json_value().dump(); }  // sorted keys: canonical

json Schedule::to_json_value() const {
  json j;
  j["version"] = version;
  if (fuse_rows > 0) j["fuse_rows"] = fuse_rows;
  j["stages"] = json::array();
  for (auto& s : stages) {
    json st;
    st["stage"] = s.stage;
    if (s.inline_stage) {
      st["inline"] = true;
    } else if (!s.tile.empty()) {
      json tile = json::object();
      for (auto& [axis, sizes] : s.tile) tile[axis] = sizes;
      st["tile"] = tile;
      st["order"] = s.order;
      st["vectorize"] = s.vectorize.empty() ? json(nullptr) : json(s.vectorize);
      for (const Knob* k : stage_int_knobs())
        if (!k->omit_default || s.*(k->field) != k->default_value) st[k->name] = s.*(k->field);
      st["fuse_epilogue"] = s.fuse_epilogue;
      if (!s.pack.empty()) st["pack"] = s.pack;
    }
    j["stages"].push_back(st);
  }
  return j;
}

Schedule Schedule::from_json(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) throw_error(ErrorKind::InvalidInput, "config: not valid JSON");
  return from_json_value(j);
}

Schedule Schedule::from_json_value(const json& j) {
  auto bad = [](const std::string& why) { throw_error(ErrorKind::InvalidInput, "config: " + why); };
  if (!j.is_object()) bad("expected a JSON object");
  Schedule s;
  try {
    for (auto& [k, v] : j.items())
      if (k != "version" && k != "stages" && k != "fuse_rows") bad("unknown key '" + k + "'");
    s.fuse_rows = j.value("fuse_rows", std::int64_t(0));
    s.version = j.at("version").get<int>();
    if (s.version != 1) bad("version " + std::to_string(s.version) + " is not supported (expected 1)");
    for (auto& st : j.at("stages")) {
      StageSchedule ss;
      for (auto& [k, v] : st.items()) {
        if (k == "stage")
          ss.stage = v.get<std::string>();
        else if (k == "tile") {
          for (auto& [axis, sizes] : v.items()) ss.tile[axis] = sizes.get<std::vector<std::int64_t>>();
        } else if (k == "order")
          ss.order = v.get<std::vector<std::string>>();
        else if (k == "vectorize")
          ss.vectorize = v.is_null() ? "" : v.get<std::string>();
        else if (const Knob* knob = stage_int_knob(k))
          ss.*(knob->field) = v.get<int>();
        else if (k == "inline")
          ss.inline_stage = v.get<bool>();
        else if (k == "fuse_epilogue")
          ss.fuse_epilogue = v.get<bool>();
        else if (k == "pack")
          ss.pack = v.get<std::vector<std::string>>();
        else
          bad("unknown stage key '" + k + "'");
      }
      if (ss.stage.empty()) bad("a stage entry has no 'stage' name");
      s.stages.push_back(std::move(ss));
    }
  } catch (const json::exception& e) {
    bad(std::string("wrong shape: ") + e.what());
  }
  return s;
}

std::string Schedule::key() const { return hash_hex(to_json()); }

Schedule naive_schedule(const Workload& w) {
  Schedule s;
  for (auto& st : w.stages) {
    StageSchedule ss;
    ss.stage = st.name;
    for (auto& a : st.axes) {
      ss.tile[a.name] = {a.reduce ? a.extent : 1};
      ss.order.push_back(a.name + ".0");
    }
    s.stages.push_back(std::move(ss));
  }
  return s;
}

namespace {

int reader_count(const Workload& w, const std::string& tensor) {
  int n = 0;
  for (auto& st : w.stages) {
    std::vector<const Expr*> acc;
    collect_accesses(st.rhs, acc);
    for (auto* a : acc)
      if (a->name == tensor) ++n;
  }
  return n;
}

}  // namespace

std::vector<std::string> strided_reads(const Expr& body, const std::string& axis) {
  std::vector<std::string> out;
  for_each_access(body, [&](const Expr& a) {
    for (size_t d = 0; d < a.indices.size(); ++d)
      if (strided_dimension(a.indices[d].coeff_of(axis), d + 1 == a.indices.size()) &&
          std::find(out.begin(), out.end(), a.name) == out.end())
        out.push_back(a.name);
  });
  return out;
}

bool unit_stride_or_invariant(const Expr& body, const std::string& axis) { return strided_reads(body, axis).empty(); }

std::vector<std::string> strided_row_reads(const Expr& body, const std::string& axis) {
  std::vector<std::string> out;
  for (auto& tensor : strided_reads(body, axis)) {
    bool rows = true;
    for_each_access(body, [&](const Expr& a) {
      if (a.name != tensor) return;
      for (size_t d = 0; d < a.indices.size(); ++d)
        rows &= row_dimension(a.indices[d].coeff_of(axis), d + 1 == a.indices.size());
    });
    if (rows) out.push_back(tensor);
  }
  return out;
}

std::vector<std::string> panel_reads(const Expr& body, const std::string& axis) {
  auto out = strided_reads(body, axis);
  auto rows = strided_row_reads(body, axis);
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const std::string& t) { return std::find(rows.begin(), rows.end(), t) != rows.end(); }),
            out.end());
  return out;
}

std::string vector_panels_problem(const Expr& body, const std::string& tensor, const std::string& axis) {
  std::string why;  // the first read's problem
  for_each_access(body, [&](const Expr& a) {
    if (!why.empty() || a.name != tensor) return;
    int along = 0;
    for (auto& ix : a.indices) {
      if (ix.plain_var().empty()) {
        why = "'" + tensor + "' is read at " + to_string(ix) + ", which panels cannot follow";
        return;
      }
      along += ix.plain_var() == axis;
    }
    if (along != 1) why = "'" + tensor + "' is read along '" + axis + "' in " + std::to_string(along) + " dimensions";
  });
  return why;
}

std::vector<std::string> vectorizable_axes(const Workload& w, int stage) {
  const Stage& st = w.stages[stage];
  std::vector<std::string> out;
  std::string last_lhs;
  for (auto& a : st.axes)
    if (!a.reduce) last_lhs = a.name;
  for (auto& a : st.axes) {
    if (!a.reduce && a.name != last_lhs) continue;
    if (unit_stride_or_invariant(st.rhs, a.name)) out.push_back(a.name);
  }
  std::stable_partition(out.begin(), out.end(), [&](const std::string& n) { return n == last_lhs; });
  return out;
}

bool can_inline(const Workload& w, int stage) {
  const Stage& st = w.stages[stage];
  return !st.is_reduction() && st.combine == Combine::Assign && w.buffers[st.output].role == Buffer::Role::Temp;
}

bool can_fuse_epilogue(const Workload& w, int stage) {
  if (stage + 1 >= static_cast<int>(w.stages.size())) return false;
  const Stage& r = w.stages[stage];
  const Stage& e = w.stages[stage + 1];
  if (w.buffers[r.output].role != Buffer::Role::Temp || e.is_reduction() || e.combine != Combine::Assign) return false;
  if (w.buffers[e.output].shape != w.buffers[r.output].shape) return false;
  if (reader_count(w, r.name) < 1) return false;
  // Every read of r's tensor must be in e, indexed exactly by e's axes in order.
  std::vector<const Expr*> acc;
  collect_accesses(e.rhs, acc);
  int reads_in_e = 0;
  for (auto* a : acc) {
    if (a->name != r.name) continue;
    ++reads_in_e;
    for (size_t d = 0; d < a->indices.size(); ++d)
      if (a->indices[d].plain_var() != e.axes[d].name) return false;
  }
  return reads_in_e == reader_count(w, r.name);
}

}  // namespace tiletune::ir
