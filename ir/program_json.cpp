#include "ir/program_json.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "tiletune/backend_plugin.h"

namespace tiletune::ir {

namespace {

using nlohmann::json;

const char* kind_name(Expr::Kind k) {
  switch (k) {
    case Expr::Kind::Const:
      return "const";
    case Expr::Kind::Size:
      return "const";
    case Expr::Kind::Access:
      return "load";
    case Expr::Kind::Neg:
      return "neg";
    case Expr::Kind::Add:
      return "add";
    case Expr::Kind::Sub:
      return "sub";
    case Expr::Kind::Mul:
      return "mul";
    case Expr::Kind::Div:
      return "div";
    case Expr::Kind::Call:
      return "call";
    case Expr::Kind::Lt:
      return "lt";
    case Expr::Kind::Le:
      return "le";
    case Expr::Kind::Gt:
      return "gt";
    case Expr::Kind::Ge:
      return "ge";
    case Expr::Kind::Eq:
      return "eq";
    case Expr::Kind::Ne:
      return "ne";
  }
  return "?";
}

json index_json(const IndexExpr& ix) {
  json terms = json::array();
  for (auto& t : ix.terms) terms.push_back({t.var, t.coeff});
  return {{"terms", terms}, {"constant", ix.constant}};
}

//! `e` as a plug-in reads it, its value wanted as `want`: every node says the type it computes
//! in ("f32" or "i32"), and a "cast" node converts wherever a value meets a node of another
//! type (ir::operand_type), so that a plug-in never applies the typing rules itself. The casts
//! `f32(x)` and `i32(x)` become such nodes too (or nothing, where x has the type already).
json expr_json(const Workload& w, const Expr& e, DType want) {
  const DType t = w.value_type(e).in(want);
  auto cast = [](json inner, DType from, DType to) {
    if (from == to) return inner;
    return json{{"op", "cast"}, {"type", dtype_name(to)}, {"args", json::array({std::move(inner)})}};
  };
  if (is_cast(e)) {
    DType from = w.operand_type(e, 0, t);
    return cast(cast(expr_json(w, e.args[0], from), from, t), t, want);
  }
  json j = {{"op", kind_name(e.kind)}, {"type", dtype_name(t)}};
  switch (e.kind) {
    case Expr::Kind::Const:
      j["value"] = e.value;
      break;
    case Expr::Kind::Size:
      j["value"] = static_cast<double>(w.sizes.at(e.name));
      break;
    case Expr::Kind::Access: {
      j["tensor"] = e.name;
      j["index"] = json::array();
      for (auto& ix : e.indices) j["index"].push_back(index_json(ix));
      break;
    }
    case Expr::Kind::Call:
      j["fn"] = e.name;
      [[fallthrough]];
    default: {
      j["args"] = json::array();
      for (size_t i = 0; i < e.args.size(); ++i) j["args"].push_back(expr_json(w, e.args[i], w.operand_type(e, i, t)));
    }
  }
  return cast(std::move(j), t, want);
}

json loops_json(const std::vector<Loop>& loops) {
  json out = json::array();
  for (auto& l : loops)
    out.push_back({{"axis", l.axis},
                   {"level", l.level},
                   {"step", l.step},
                   {"block", l.block},
                   {"extent", l.extent},
                   {"reduce", l.reduce},
                   {"parallel", l.parallel}});
  return out;
}

const char* role_name(Buffer::Role r) {
  return r == Buffer::Role::Input ? "input" : r == Buffer::Role::Output ? "output" : "temp";
}

//! A padded input's pad value: a number, or "inf" / "-inf" (JSON has no infinities); null
//! for a tensor without one.
json pad_json(const std::optional<double>& pad) {
  if (!pad) return nullptr;
  if (std::isinf(*pad)) return pad_text(*pad);
  return *pad;
}

}  // namespace

std::string program_to_json(const Workload& w, const LoopNest& nest, const std::string& config_json) {
  json buffers = json::array();
  int argument = 0;
  for (size_t b = 0; b < w.buffers.size(); ++b)
    buffers.push_back({{"name", w.buffers[b].name},
                       {"role", role_name(w.buffers[b].role)},
                       {"argument", w.buffers[b].role == Buffer::Role::Temp ? -1 : argument++},
                       {"dtype", dtype_name(w.buffers[b].dtype)},
                       {"shape", w.buffers[b].shape},
                       {"pad", pad_json(w.buffers[b].pad)},
                       {"workspace_offset", nest.workspace_offset[b]}});
  json stages = json::array();
  for (auto& sn : nest.stages) {
    const Stage& st = w.stages[sn.stage];
    json axes = json::array();
    for (auto& a : st.axes) axes.push_back({{"name", a.name}, {"extent", a.extent}, {"reduce", a.reduce}});
    json packs = json::array();
    for (auto& p : sn.packs) packs.push_back(w.buffers[p.buffer].name);
    // The body's value is converted to the accumulator's type; the epilogue's stays in its own.
    const DType accumulate = w.accumulator_type(sn.stage);
    json epilogue = sn.epilogue >= 0 ? expr_json(w, sn.epilogue_body, w.epilogue_type(sn.epilogue)) : json(nullptr);
    stages.push_back({{"name", st.name},
                      {"output", w.buffers[st.output].name},
                      {"store", w.buffers[sn.store].name},
                      {"combine", combine_token(st.combine)},
                      {"axes", axes},
                      {"accumulate", dtype_name(accumulate)},
                      {"body", expr_json(w, sn.body, accumulate)},
                      {"epilogue_body", epilogue},
                      {"outer", loops_json(sn.outer)},
                      {"reduce_inner", loops_json(sn.reduce_inner)},
                      {"reg", loops_json(sn.reg)},
                      {"vector_axis", sn.vector_axis},
                      {"lanes", sn.lanes},
                      {"unroll", sn.unroll},
                      {"prefetch", sn.prefetch},
                      {"packs", packs}});
  }
  json config = json::parse(config_json, nullptr, false);
  return json{{"abi", 1},
              {"abi_minor", TT_PLUGIN_ABI_MINOR},
              {"op", w.op.name},
              {"workload", w.key},
              {"sizes", w.sizes},
              {"config", config.is_discarded() ? json(nullptr) : config},
              {"buffers", buffers},
              {"workspace_floats", nest.workspace_floats},
              {"fuse_rows", nest.fuse_rows},
              {"stages", stages}}
      .dump(2);
}

}  // namespace tiletune::ir
