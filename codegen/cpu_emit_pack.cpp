// Panels: inputs copied before a stage runs so that full register tiles read them contiguously
// (ir::Pack), grouped for the dot-product tiles, and those tiles' reduction loop.
#include "codegen/cpu_emit.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace tiletune::codegen::cpu_emit {

void Emitter::open_panel_loop(int depth, const ir::Pack& pack, const std::string& panel) {
  std::string n = std::to_string(pack.panels), parallel;
  if (prepares_) {
    const char* mode = w_.buffers[pack.buffer].constant ? kPrepareMode : kComputeMode;
    n = std::string("(") + mode + " ? " + n + " : 0)";
    parallel = std::string(" if") + mode;
  }
  line(depth, "#pragma omp parallel for schedule(static) num_threads(tt_threads)" + parallel);
  line(depth, "for (std::int64_t " + panel + " = 0; " + panel + " < " + n + "; ++" + panel + ") {");
}

void Emitter::emit_pack(int depth, const ir::Pack& pack) {
  if (pack.group > 1) return emit_grouped_pack(depth, pack);
  const auto& buf = w_.buffers[pack.buffer];
  std::string src = tensor_.at(buf.name);
  std::string dst = fresh(buf.name + "_packed");
  packed_names_[buf.name] = dst;
  std::string blk = std::to_string(pack.block);
  line(depth, "// pack " + buf.name + " into panels of " + blk + " along " + pack.axis + ": " + dst + "[panel]" +
                  std::string(buf.shape.size() > 1 ? "[...]" : "") + "[" + blk + "], zero-padded");
  line(depth, storage(pack.buffer) + "* __restrict " + dst + " = " +
                  as_storage(pack.buffer, "tt_workspace + " + std::to_string(pack.offset)) + ";");
  std::string panel = fresh("panel");
  open_panel_loop(depth, pack, panel);
  int d = depth + 1;
  std::vector<std::string> idx(buf.shape.size());
  Linear dst_lin, src_lin;
  dst_lin.add(panel, pack.others * pack.block);
  std::int64_t dst_stride = pack.block, src_stride = 1;
  std::vector<std::int64_t> src_strides(buf.shape.size());
  for (size_t k = buf.shape.size(); k-- > 0;) {
    src_strides[k] = src_stride;
    src_stride *= buf.shape[k];
  }
  // Panels across the contiguous dimension (B[n, k] along n) are filled by transposing
  // square tiles of lanes in registers; the last dimension then gets no loop of its own here.
  const size_t last = buf.shape.size() - 1;
  const std::int64_t lanes = traits_.vector_lanes;
  const bool transpose =
      static_cast<int>(last) != pack.dim && lanes > 1 && pack.block % lanes == 0 && buf.dtype == DType::F32;
  const std::string zero = buf.dtype == DType::F32 ? "0.0f" : storage(pack.buffer) + "(0)";
  std::vector<std::string> opened;
  for (size_t k = 0; k < buf.shape.size(); ++k) {
    if (static_cast<int>(k) == pack.dim || (transpose && k == last)) continue;
    idx[k] = fresh("i" + std::to_string(k));
    line(d++, "for (std::int64_t " + idx[k] + " = 0; " + idx[k] + " < " + std::to_string(buf.shape[k]) + "; ++" +
                  idx[k] + ") {");
    opened.push_back(idx[k]);
    src_lin.add(idx[k], src_strides[k]);
  }
  for (size_t k = buf.shape.size(); k-- > 0;) {
    if (static_cast<int>(k) == pack.dim) continue;
    if (!idx[k].empty()) dst_lin.add(idx[k], dst_stride);
    dst_stride *= buf.shape[k];
  }
  std::string j = fresh("j");
  std::string first = fresh("first");
  std::string extent = std::to_string(buf.shape[pack.dim]);
  std::string pack_stride = std::to_string(src_strides[pack.dim]);
  line(d, "const std::int64_t " + first + " = " + panel + " * " + blk + ";");
  std::string to = fresh("to"), from = fresh("from");
  line(d, storage(pack.buffer) + "* __restrict " + to + " = " + dst + " + " + dst_lin.str() + ";");
  line(d, "const " + storage(pack.buffer) + "* __restrict " + from + " = " + src + " + " + src_lin.str() + " + " +
              first + " * " + pack_stride + ";");
  if (transpose) {
    // to[k][j] = from[j][k] over the row (k < n) and the panel (j < block): whole tiles,
    // then the row's last columns one by one; a panel cut by the tensor's end is zero-padded.
    std::int64_t n = buf.shape[last];
    std::string k = fresh("k"), kk = fresh("kk"), jj = fresh("jj");
    std::string ln = std::to_string(lanes), ns = std::to_string(n);
    auto scalar = [&](int at, const std::string& from_k, bool guard) {
      line(at, "for (std::int64_t " + k + " = " + from_k + "; " + k + " < " + ns + "; ++" + k + ")");
      line(at + 1, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") " + to + "[" + k + " * " +
                       blk + " + " + j + "] = " + (guard ? first + " + " + j + " < " + extent + " ? " : "") + from +
                       "[" + j + " * " + pack_stride + " + " + k + "]" + (guard ? " : " + zero + ";" : ";"));
    };
    bool cut = buf.shape[pack.dim] % pack.block != 0;
    int at = d;
    if (cut) line(at++, "if (" + first + " + " + blk + " <= " + extent + ") {");
    line(at, "for (std::int64_t " + kk + " = 0; " + kk + " + " + ln + " <= " + ns + "; " + kk + " += " + ln + ")");
    line(at + 1, "for (std::int64_t " + jj + " = 0; " + jj + " < " + blk + "; " + jj + " += " + ln + ")");
    line(at + 2, "tt_transpose_tile(" + from + " + " + jj + " * " + pack_stride + " + " + kk + ", " + pack_stride +
                     ", " + to + " + " + kk + " * " + blk + " + " + jj + ", " + blk + ");");
    if (n % lanes != 0) scalar(at, std::to_string(n - n % lanes), false);
    if (cut) {
      line(d, "} else {");
      scalar(d + 1, "0", true);
      line(d, "}");
    }
  } else if (buf.shape[pack.dim] % pack.block == 0) {
    line(d, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") " + to + "[" + j + "] = " + from +
                "[" + j + " * " + pack_stride + "];");
  } else {
    line(d, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") " + to + "[" + j + "] = " + first +
                " + " + j + " < " + extent + " ? " + from + "[" + j + " * " + pack_stride + "] : " + zero + ";");
  }
  for (size_t k = 0; k < opened.size(); ++k) line(--d, "}");
  line(depth, "}");
}

void Emitter::emit_grouped_pack(int depth, const ir::Pack& pack) {
  const auto& buf = w_.buffers[pack.buffer];
  const size_t rank = buf.shape.size();
  const int gd = pack.group_dim(rank);
  const std::int64_t k_extent = buf.shape[gd], k_padded = pack.grouped(k_extent);
  std::string dst = fresh(buf.name + "_packed");
  packed_names_[buf.name] = dst;
  std::string blk = std::to_string(pack.block), g = std::to_string(pack.group);
  line(depth, "// pack " + buf.name + " into panels of " + blk + " along " + pack.axis + " with " + g +
                  " consecutive points of dimension " + std::to_string(gd) + " interleaved: " + dst +
                  "[panel][...][k / " + g + "][" + blk + "][k % " + g + "], zero-padded");
  line(depth, storage(pack.buffer) + "* __restrict " + dst + " = " +
                  as_storage(pack.buffer, "tt_workspace + " + std::to_string(pack.offset)) + ";");
  std::vector<std::int64_t> src_strides(rank);
  std::int64_t st = 1;
  for (size_t d = rank; d-- > 0;) {
    src_strides[d] = st;
    st *= buf.shape[d];
  }
  std::string panel = fresh("panel");
  open_panel_loop(depth, pack, panel);
  int d = depth + 1;
  Linear dst_lin, src_lin;
  dst_lin.add(panel, pack.others * pack.block);
  std::vector<std::string> opened;
  std::int64_t dst_stride = pack.block * k_padded;
  std::vector<std::string> idx(rank);
  for (size_t k = 0; k < rank; ++k) {
    if (static_cast<int>(k) == pack.dim || static_cast<int>(k) == gd) continue;
    idx[k] = fresh("i" + std::to_string(k));
    line(d++, "for (std::int64_t " + idx[k] + " = 0; " + idx[k] + " < " + std::to_string(buf.shape[k]) + "; ++" +
                  idx[k] + ") {");
    opened.push_back(idx[k]);
    src_lin.add(idx[k], src_strides[k]);
  }
  for (size_t k = rank; k-- > 0;) {
    if (idx[k].empty()) continue;
    dst_lin.add(idx[k], dst_stride);
    dst_stride *= buf.shape[k];
  }
  std::string to = fresh("to"), from = fresh("from"), kk = fresh("k"), j = fresh("j"), col = fresh("col");
  line(d, storage(pack.buffer) + "* __restrict " + to + " = " + dst + " + " + dst_lin.str() + ";");
  line(d, "const " + storage(pack.buffer) + "* __restrict " + from + " = " + tensor_.at(buf.name) + " + " +
              src_lin.str() + ";");
  // Whole groups of whole panels copy without tests, one statement per point of a group
  // (GCC vectorizes the interleaving); the panel at the end of the tensor and the group cut
  // by the axis's end test each element.
  const std::string ks = std::to_string(src_strides[gd]), ps = std::to_string(src_strides[pack.dim]);
  const std::string n = std::to_string(buf.shape[pack.dim]), zero = storage(pack.buffer) + "(0)";
  std::string kg = fresh("kg"), t = fresh("t"), f = fresh("f");
  line(d,
       "for (std::int64_t " + kg + " = 0; " + kg + " < " + std::to_string(k_padded / pack.group) + "; ++" + kg + ") {");
  line(d + 1, storage(pack.buffer) + "* __restrict " + t + " = " + to + " + " + kg + " * " +
                  std::to_string(pack.block * pack.group) + ";");
  line(d + 1, "const " + storage(pack.buffer) + "* __restrict " + f + " = " + from + " + " + kg + " * " +
                  std::to_string(pack.group * src_strides[gd]) + " + " + panel + " * " + blk + " * " + ps + ";");
  line(d + 1, "if (" + panel + " * " + blk + " + " + blk + " <= " + n + " && " + kg + " * " + g + " + " + g +
                  " <= " + std::to_string(k_extent) + ") {");
  line(d + 2, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") {");
  for (int r = 0; r < pack.group; ++r)
    line(d + 3, t + "[" + j + " * " + g + " + " + std::to_string(r) + "] = " + f + "[" + j + " * " + ps + " + " +
                    std::to_string(r * src_strides[gd]) + "];");
  line(d + 2, "}");
  line(d + 1, "} else {");
  line(d + 2, "for (std::int64_t " + j + " = 0; " + j + " < " + blk + "; ++" + j + ") {");
  line(d + 3, "const std::int64_t " + col + " = " + panel + " * " + blk + " + " + j + ";");
  line(d + 3, "for (std::int64_t " + kk + " = 0; " + kk + " < " + g + "; ++" + kk + ")");
  line(d + 4, t + "[" + j + " * " + g + " + " + kk + "] = " + col + " < " + n + " && " + kg + " * " + g + " + " + kk +
                  " < " + std::to_string(k_extent) + " ? " + f + "[" + j + " * " + ps + " + " + kk + " * " + ks +
                  "] : " + zero + ";");
  line(d + 2, "}");
  line(d + 1, "}");
  line(d, "}");
  for (size_t k = 0; k < opened.size(); ++k) line(--d, "}");
  line(depth, "}");
}

std::string Emitter::grouped_element(const Expr& access, const ir::Pack& pack, const Point& p) {
  const auto& buf = w_.buffers[pack.buffer];
  const int gd = pack.group_dim(buf.shape.size());
  Linear lin;
  const AxisValue& col = p.at(pack.axis);  // at the register base: panel * block
  lin.add(col.var, pack.others);
  lin.constant += col.offset * pack.group;
  const AxisValue& k = p.at(access.indices[gd].plain_var());
  lin.add(k.var, pack.block);  // (k / g) * block * g, k a multiple of g
  lin.constant += k.offset * pack.block;
  std::int64_t stride = pack.block * pack.grouped(buf.shape[gd]);
  for (size_t d = buf.shape.size(); d-- > 0;) {
    if (static_cast<int>(d) == pack.dim || static_cast<int>(d) == gd) continue;
    const AxisValue& v = p.at(access.indices[d].plain_var());
    lin.add(v.var, stride);
    lin.constant += v.offset * stride;
    stride *= buf.shape[d];
  }
  return packed_names_.at(buf.name) + "[" + lin.str() + "]";
}

bool Emitter::dot_guardable() const {
  for (auto* e : {&sn_->body.args[0], &sn_->body.args[1]})
    if (w_.may_read_outside(sn_->stage, e->name, e->indices.size() - 1, e->indices.back())) return false;
  return true;
}

void Emitter::dot_loop(int depth, const std::vector<Point>& pts, const std::vector<std::string>& acc) {
  const Loop& l = sn_->reduce_inner.back();
  const std::string g = std::to_string(sn_->dot_group);
  std::string parent = var(l.axis, l.level - 1);
  std::string end = block_end(parent, l.block, l.extent);
  const std::string& v = var(l.axis, l.level);
  const Expr& body = sn_->body;
  int vi = 0;  // which operand is the vector one (packed)
  const ir::Pack* pack = nullptr;
  for (auto& pk : sn_->packs)
    if (pk.group > 1) pack = &pk;
  if (body.args[1].name == w_.buffers[pack->buffer].name) vi = 1;
  const Expr& vec = body.args[vi];
  const Expr& bcast = body.args[1 - vi];
  const auto& sb = w_.buffers[w_.buffer_index(bcast.name)];
  const bool u8_vector = w_.buffers[pack->buffer].dtype == DType::U8;
  // A group of the broadcast operand outside it (border tiles) is its pad value in each place.
  std::int32_t pad_group = 0;
  {
    unsigned char group[4] = {0, 0, 0, 0};
    for (int e = 0; e < sn_->dot_group; ++e) ir::store_element(sb.dtype, group, e, sb.pad.value_or(0.0));
    std::memcpy(&pad_group, group, 4);
  }
  auto body_at = [&](int d, bool tail) {
    Block blk;
    // A load's variable, declared on its first use in this block.
    auto named = [&](const std::string& load, const std::string& base) {
      auto it = blk.load_names.find(load);
      if (it != blk.load_names.end()) return it->second;
      std::string name = names_.candidate(base + "_" + std::to_string(blk.per_tensor[base]++));
      blk.load_names[load] = name;
      line(d, "const tt_vi " + name + " = " + load + ";");
      return name;
    };
    // One row of vectors, then each row's broadcast right before its updates.
    std::vector<std::string> vs;
    for (auto& p : pts) vs.push_back(named("tt_load_raw(&" + grouped_element(vec, *pack, p) + ")", vec.name));
    for (size_t i = 0; i < pts.size(); ++i) {
      std::string addr = element(bcast.name, bcast.indices, pts[i]);
      std::string load = tail ? "tt_bcast_part(&" + addr + ", (" + end + " - " + v + ") * " +
                                    std::to_string(ir::dtype_bytes(sb.dtype)) + ")"
                              : "tt_bcast32(&" + addr + ")";
      if (guarded_) {  // the group's own axis never leaves the tensor (dot_guardable)
        std::string cond;
        for (size_t dim = 0; dim + 1 < bcast.indices.size(); ++dim)
          if (w_.may_read_outside(sn_->stage, bcast.name, dim, bcast.indices[dim]))
            cond += (cond.empty() ? "" : " && ") + std::string("tt_in(") + index_at(bcast.indices[dim], pts[i]) + ", " +
                    std::to_string(sb.shape[dim]) + ")";
        if (!cond.empty()) load = "(" + cond + " ? " + load + " : tt_splati(" + std::to_string(pad_group) + "))";
      }
      std::string s_name = named(load, bcast.name);
      std::string dot = sn_->dot_group == 2 ? "tt_dot_bf16(" + acc[i] + ", " + s_name + ", " + vs[i] + ")"
                        : u8_vector         ? "tt_dot_u8s8(" + acc[i] + ", " + vs[i] + ", " + s_name + ")"
                                            : "tt_dot_u8s8(" + acc[i] + ", " + s_name + ", " + vs[i] + ")";
      line(d, acc[i] + " = " + dot + ";");
    }
  };
  line(depth, "std::int64_t " + v + " = " + parent + ";");
  if (sn_->unroll > 0) line(depth, "#pragma GCC unroll " + std::to_string(sn_->unroll));
  line(depth, "for (; " + v + " + " + g + " <= " + end + "; " + v + " += " + g + ") {");
  body_at(depth + 1, false);
  line(depth, "}");
  if (l.extent % sn_->dot_group != 0) {
    line(depth, "if (" + v + " < " + end + ") {  // the axis ends inside a group");
    body_at(depth + 1, true);
    line(depth, "}");
  }
}

}  // namespace tiletune::codegen::cpu_emit
