// The work-group emitter: OpenCL C and CUDA C from the same loop nests (see gpu_kernel.hpp).
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "codegen/c_text.hpp"
#include "codegen/gpu_dialect.hpp"
#include "codegen/gpu_kernel.hpp"
#include "support/error.hpp"

namespace tiletune::codegen {

namespace {

using ir::Combine;
using ir::Expr;
using ir::Loop;

std::string combine(Combine c, const std::string& a, const std::string& b, bool vec) {
  switch (c) {
    case Combine::Add:
      return a + " + " + b;
    case Combine::Mul:
      return a + " * " + b;
    case Combine::Max:
      return std::string(vec ? "fmax(" : "TT_MAX(") + a + ", " + b + ")";
    case Combine::Min:
      return std::string(vec ? "fmin(" : "TT_MIN(") + a + ", " + b + ")";
    default:
      return b;
  }
}

Linear scaled(const Linear& l, std::int64_t c) {
  Linear out;
  for (auto& [v, k] : l.terms) out.add(v, k * c);
  out.constant = l.constant * c;
  return out;
}

void add_to(Linear& into, const Linear& l) {
  for (auto& [v, k] : l.terms) into.add(v, k);
  into.constant += l.constant;
}

//! A spatial axis of a stage mapped to work-groups and work-items.
struct SpatialAxis {
  std::string name;
  std::int64_t extent = 1, group = 1, reg = 1, items = 1, groups = 1;
  size_t group_pos = 0, local_pos = 0;  //!< places of its outermost / innermost tile loop in the order
  bool tail = false;                    //!< some points of the last group are past the extent
  std::string start;                    //!< the item's first point
  std::string group_start;
  std::map<std::int64_t, std::string> clamped;  //!< per register offset (per vector when vectorized), when tail
};

class Emitter {
 public:
  Emitter(const ir::Workload& w, const ir::LoopNest& nest, GpuDialect d, bool split)
      : w_(w),
        nest_(nest),
        d_(dialect_of(d)),
        cuda_(d == GpuDialect::Cuda),
        split_vectors_(split || d == GpuDialect::Cuda) {
    std::int64_t largest = nest.workspace_floats;
    for (auto& b : w.buffers) largest = std::max(largest, b.elements());
    index_ = largest < (std::int64_t(1) << 31) ? "int" : cuda_ ? "long long" : "long";
  }

  std::string run(const std::string& config_json) {
    std::ostringstream body;
    std::vector<Launch> launches;
    for (size_t i = 0; i < nest_.stages.size(); ++i) {
      launches.push_back(stage(nest_.stages[i], "tt_stage" + std::to_string(i)));
      body << out_.str();
      out_.str("");
    }
    std::ostringstream src;
    src << launch_line(launches) << "\n";
    src << "// tiletune " << (cuda_ ? "CUDA" : "OpenCL") << " kernels for op " << w_.op.name << " with "
        << w_.sizes_text() << "\n// workload " << w_.key << "\n// config " << config_json << "\n"
        << (cuda_ ? "// tensors and the workspace must be 16-byte aligned (float4 loads and stores)\n" : "")
        << d_.prelude << "\n"
        << body.str();
    return src.str();
  }

 private:
  const ir::Workload& w_;
  const ir::LoopNest& nest_;
  const Dialect& d_;
  bool cuda_;
  bool split_vectors_;
  std::string index_;
  std::ostringstream out_;
  LocalNames names_;
  std::map<std::string, std::string> tensor_;

  // Per stage.
  const ir::StageNest* sn_ = nullptr;
  const ir::Stage* st_ = nullptr;
  std::map<std::string, SpatialAxis> spatial_;
  std::map<std::string, std::string> reduce_var_;    //!< innermost loop variable of each reduction axis
  std::map<std::string, std::string> reduce_outer_;  //!< innermost tile-loop variable of each reduction axis
  std::map<std::string, const ir::Pack*> staged_;
  std::map<std::string, std::string> staged_name_;
  std::string vec_axis_;    //!< the spatial axis computed in vectors; "" for none
  std::int64_t lanes_ = 1;  //!< lanes of vector arithmetic (1 with split vectors)
  //! Split vectors (CUDA, which has no float4 arithmetic): scalar math on the register tile,
  //! but loads and stores along the vector axis `split_` floats at a time where aligned.
  std::int64_t split_ = 0;

  void line(int depth, const std::string& text) { out_ << std::string(2 * depth, ' ') << text << "\n"; }

  std::string vector_type() const { return lanes_ > 1 ? "float" + std::to_string(lanes_) : "float"; }
  //! Whether a tensor is stored in 16-bit words (bf16, f16) and its conversion's suffix.
  const char* half(const std::string& tensor) const {
    ir::DType t = w_.buffers[w_.buffer_index(tensor)].dtype;
    return t == ir::DType::BF16 ? "bf16" : t == ir::DType::F16 ? "f16" : nullptr;
  }
  //! An element `base[flat]` of a tensor in f32; a vector of `lanes_` of them where `vec`.
  std::string widened(const std::string& tensor, const std::string& base, const std::string& flat, bool vec) const {
    const char* h = half(tensor);
    if (!vec) return std::string("tt_ld_") + h + "(" + base + "[" + flat + "])";
    std::string v = "(" + vector_type() + ")(";
    for (std::int64_t j = 0; j < lanes_; ++j)
      v += std::string(j ? ", " : "") + "tt_ld_" + h + "(" + base + "[" + flat + " + " + std::to_string(j) + "])";
    return v + ")";
  }
  //! A lane-invariant value as a whole vector.
  std::string widen(const std::string& v) const { return lanes_ > 1 ? "(" + vector_type() + ")(" + v + ")" : v; }
  bool along_vector(const Expr& access) const {
    if (lanes_ <= 1) return false;
    for (auto& ix : access.indices)
      if (ix.coeff_of(vec_axis_) != 0) return true;
    return false;
  }
  //! The loads of one straight-line block, deduplicated by what they load.
  struct Block {
    std::vector<std::string> loads;
    std::map<std::string, std::string> names;
    std::map<std::string, int> per_tensor;
  };

  static constexpr const char* kLane = "xyzw";

  //! Whether split vector loads of an access are aligned: its last index is the vector axis
  //! plus a multiple of the split (nothing else), and whole vectors make every row (of the
  //! tensor or of its staged tile). Work-item starts are multiples of the split (the register
  //! tile along the vector axis is whole vectors) and so are workspace offsets.
  bool split_aligned(const Expr& access) const {
    if (access.indices.empty() || (half(access.name) && !staged_.count(access.name))) return false;
    const ir::IndexExpr& last = access.indices.back();
    if (last.terms.size() != 1 || last.terms[0].var != vec_axis_ || last.terms[0].coeff != 1 ||
        last.constant % split_ != 0)
      return false;
    auto staged = staged_.find(access.name);
    std::int64_t row =
        staged != staged_.end() ? staged->second->box.back() : w_.buffers[w_.buffer_index(access.name)].shape.back();
    return row % split_ == 0;
  }

  //! One lane of a vector load: the vector starts at the point's vector-aligned offset.
  std::string split_load(const Expr& e, const std::map<std::string, std::int64_t>& point, Block& blk) {
    std::int64_t lane = point.at(vec_axis_) % split_;
    auto start = point;
    start[vec_axis_] -= lane;
    auto [base, flat] = address(e, start);
    std::string type = "float" + std::to_string(split_);
    std::string load = cuda_ ? "*reinterpret_cast<const " + type + "*>(" + base + " + " + flat + ")"
                             : "vload" + std::to_string(split_) + "(0, " + base + " + " + flat + ")";
    return named_load(blk, e.name, type, load) + "." + kLane[lane];
  }

  //! The variable holding `load` in this block, declared on first use.
  std::string named_load(Block& blk, const std::string& tensor, const std::string& type, const std::string& load) {
    auto it = blk.names.find(load);
    if (it == blk.names.end()) {
      std::string name = fresh("v_" + tensor + std::to_string(blk.per_tensor[tensor]++));
      blk.loads.push_back("const " + type + " " + name + " = " + load + ";");
      it = blk.names.emplace(load, name).first;
    }
    return it->second;
  }

  //! True if `e` reads nothing that moves along the vector axis (nor the accumulator).
  bool lane_invariant(const Expr& e) const {
    if (lanes_ <= 1) return false;
    if (e.kind == Expr::Kind::Access) return e.name != st_->name && !along_vector(e);
    for (auto& a : e.args)
      if (!lane_invariant(a)) return false;
    return true;
  }

  std::string fresh(const std::string& base) { return names_.fresh(base); }

  //! The value of `axis` at register point `offset` (spatial) or in the innermost loop (reduction).
  Linear axis_value(const std::string& axis, std::int64_t offset) const {
    Linear l;
    auto sp = spatial_.find(axis);
    if (sp == spatial_.end()) {
      l.add(reduce_var_.at(axis), 1);
    } else if (sp->second.tail) {
      std::int64_t within = split_ && axis == vec_axis_ ? offset % split_ : 0;  // a lane of a clamped vector
      l.add(sp->second.clamped.at(offset - within), 1);
      l.constant = within;
    } else {
      l.add(sp->second.start, 1);
      l.constant = offset;
    }
    return l;
  }

  Linear index_value(const ir::IndexExpr& ix, const std::map<std::string, std::int64_t>& point) const {
    Linear l;
    l.constant = ix.constant;
    for (auto& t : ix.terms) {
      auto off = point.find(t.var);
      add_to(l, scaled(axis_value(t.var, off == point.end() ? 0 : off->second), t.coeff));
    }
    return l;
  }

  //! Where the tile staged for a group starts along one index expression.
  Linear staged_origin(const ir::IndexExpr& ix) const {
    Linear l;
    l.constant = ix.constant;
    for (auto& t : ix.terms) {
      Linear start;
      std::int64_t span = 1;
      auto sp = spatial_.find(t.var);
      if (sp != spatial_.end()) {
        start.add(sp->second.group_start, 1);
        span = sp->second.group;
      } else {
        auto outer = reduce_outer_.find(t.var);
        if (outer != reduce_outer_.end()) start.add(outer->second, 1);
        for (auto& r : sn_->reduce_inner)
          if (r.axis == t.var) span = r.block;
      }
      if (t.coeff < 0) start.constant += span - 1;
      add_to(l, scaled(start, t.coeff));
    }
    return l;
  }

  //! The tensor (or staged tile) an access reads and the flat index into it.
  std::pair<std::string, std::string> address(const Expr& access,
                                              const std::map<std::string, std::int64_t>& point) const {
    const auto& shape = w_.buffers[w_.buffer_index(access.name)].shape;
    auto staged = staged_.find(access.name);
    Linear flat;
    std::int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      Linear v = index_value(access.indices[d], point);
      if (staged != staged_.end()) {
        add_to(v, scaled(staged_origin(access.indices[d]), -1));
        add_to(flat, scaled(v, stride));
        stride *= staged->second->box[d];
      } else {
        add_to(flat, scaled(v, stride));
        stride *= shape[d];
      }
    }
    return {staged != staged_.end() ? staged_name_.at(access.name) : tensor_.at(access.name), flat.str()};
  }

  std::string value(const Expr& e, const std::map<std::string, std::int64_t>& point, Block& blk,
                    const std::string& acc) {
    auto arg = [&](size_t i) { return value(e.args[i], point, blk, acc); };
    switch (e.kind) {
      case Expr::Kind::Const:
        return float_literal(e.value);
      case Expr::Kind::Size:
        return float_literal(static_cast<double>(w_.sizes.at(e.name)));
      case Expr::Kind::Access: {
        if (!acc.empty() && e.name == st_->name) return acc;
        if (split_ && split_aligned(e)) return split_load(e, point, blk);
        auto [base, flat] = address(e, point);
        bool vec = along_vector(e);
        std::string load = half(e.name) && !staged_.count(e.name) ? widened(e.name, base, flat, vec)
                           : vec ? "vload" + std::to_string(lanes_) + "(0, " + base + " + " + flat + ")"
                                 : base + "[" + flat + "]";
        // A padded input past its border reads its pad value (check_schedule keeps such
        // reads scalar and unstaged).
        const auto& buf = w_.buffers[w_.buffer_index(e.name)];
        std::string inside;
        for (size_t d = 0; d < e.indices.size(); ++d)
          if (w_.may_read_outside(sn_->stage, e.name, d, e.indices[d])) {
            std::string ix = index_value(e.indices[d], point).str();
            inside += (inside.empty() ? "" : " && ") + std::string("(") + ix + ") >= 0 && (" + ix + ") < " +
                      std::to_string(buf.shape[d]);
          }
        if (!inside.empty()) load = "(" + inside + " ? " + load + " : " + float_literal(buf.pad.value_or(0.0)) + ")";
        return named_load(blk, e.name, vec ? vector_type() : "float", load);
      }
      case Expr::Kind::Neg:
        return "(-" + arg(0) + ")";
      case Expr::Kind::Call: {
        // fmax/fmin take a vector and a scalar alike (max(v, 0.0f) in a vectorized epilogue).
        std::string fn = lanes_ > 1 && (e.name == "max" || e.name == "min") ? "f" + e.name : d_.functions.at(e.name);
        std::string s = fn + "(";
        for (size_t i = 0; i < e.args.size(); ++i) s += (i ? ", " : "") + arg(i);
        return s + ")";
      }
      case Expr::Kind::Add:
      case Expr::Kind::Sub:
      case Expr::Kind::Mul:
      case Expr::Kind::Div:
        return "(" + arg(0) + c_operator(e.kind) + arg(1) + ")";
      default:
        return "((" + arg(0) + c_operator(e.kind) + arg(1) + ") ? 1.0f : 0.0f)";  // comparisons
    }
  }

  //! Every register point of the stage: offsets of the spatial axes, last axis fastest.
  std::vector<std::map<std::string, std::int64_t>> points() const {
    std::vector<std::map<std::string, std::int64_t>> pts{{}};
    for (auto& l : sn_->reg) {
      std::vector<std::map<std::string, std::int64_t>> next;
      std::int64_t step = l.axis == vec_axis_ ? lanes_ : 1;
      for (auto& p : pts)
        for (std::int64_t i = 0; i < l.block; i += step) {
          auto q = p;
          q[l.axis] = i;
          next.push_back(q);
        }
      pts = std::move(next);
    }
    return pts;
  }

  std::string point_suffix(const std::map<std::string, std::int64_t>& p) const {
    std::string s;
    for (auto& l : sn_->reg) s += "_" + std::to_string(p.at(l.axis) / (l.axis == vec_axis_ ? lanes_ : 1));
    return s;
  }

  //! The access that stores a point of the stage into `tensor` (indexed by the left-hand axes).
  Expr output_access(const std::string& tensor) const {
    Expr target;
    target.kind = Expr::Kind::Access;
    target.name = tensor;
    for (auto& a : st_->axes)
      if (!a.reduce) {
        ir::IndexExpr ix;
        ix.terms.push_back({a.name, 1});
        target.indices.push_back(ix);
      }
    return target;
  }

  //! The condition that a register point is inside the output ("" if always).
  std::string inside(const std::map<std::string, std::int64_t>& p) const {
    std::string c;
    for (auto& [name, a] : spatial_)
      if (a.tail)
        c +=
            (c.empty() ? "" : " && ") + a.start + " + " + std::to_string(p.at(name)) + " < " + std::to_string(a.extent);
    return c;
  }

  void map_spatial_axes(int depth, std::int64_t& groups, std::int64_t& items) {
    spatial_.clear();
    for (auto& r : sn_->reg) {
      SpatialAxis a;
      a.name = r.axis;
      a.extent = r.extent;
      a.reg = r.block;
      int levels = 0;
      for (size_t p = 0; p < sn_->outer.size(); ++p) {
        const Loop& l = sn_->outer[p];
        if (l.axis != r.axis) continue;
        ++levels;
        if (l.level == 0) a.group_pos = p;
        if (l.level == r.level - 1) a.local_pos = p;
      }
      a.group = levels >= 2 ? sn_->outer[a.local_pos].block : a.reg;
      a.items = a.group / a.reg;
      a.groups = (a.extent + a.group - 1) / a.group;
      a.tail = a.extent % a.group != 0;
      spatial_[a.name] = a;
    }
    // Mixed-radix decomposition of the group and item ids: the axis whose loop comes later in
    // the order varies faster (neighbouring items then touch neighbouring elements).
    auto decompose = [&](const std::string& id, bool local) {
      std::vector<SpatialAxis*> axes;
      for (auto& [n, a] : spatial_) axes.push_back(&a);
      std::sort(axes.begin(), axes.end(),
                [&](auto* x, auto* y) { return local ? x->local_pos < y->local_pos : x->group_pos < y->group_pos; });
      std::int64_t stride = 1;
      for (size_t i = axes.size(); i-- > 0;) {
        SpatialAxis& a = *axes[i];
        std::int64_t radix = local ? a.items : a.groups;
        std::string coord = id;
        if (stride > 1) coord = "(" + coord + " / " + std::to_string(stride) + ")";
        if (i > 0 && radix > 1) coord = "(" + coord + " % " + std::to_string(radix) + ")";
        if (radix == 1) coord = "0";
        if (!local) {
          a.group_start = fresh(a.name + "_g");
          line(depth, "const " + index_ + " " + a.group_start + " = " +
                          (coord == "0" ? "0" : coord + " * " + std::to_string(a.group)) +
                          ";  // first point of the work-group along " + a.name);
        } else {
          a.start = fresh(a.name + "0");
          std::string off = coord == "0" ? "" : " + " + coord + " * " + std::to_string(a.reg);
          line(depth,
               "const " + index_ + " " + a.start + " = " + a.group_start + off + ";  // first point of the work-item");
        }
        stride *= radix;
      }
      return stride;
    };
    groups = decompose("tt_group", false);
    items = decompose("tt_item", true);
    for (auto& [n, a] : spatial_) {
      if (!a.tail) continue;
      // Points past the end are computed on the last valid index (never stored): every load
      // stays in bounds and the register tile needs no branches. A vector axis clamps whole
      // vectors (its extent is a multiple of the lanes).
      std::int64_t step = n != vec_axis_ ? 1 : split_ ? split_ : lanes_;
      for (std::int64_t i = 0; i < a.reg; i += step) {
        a.clamped[i] = fresh(a.name + "_" + std::to_string(i));
        line(depth, "const " + index_ + " " + a.clamped[i] + " = TT_MIN(" + a.start + " + " + std::to_string(i) + ", " +
                        std::to_string(a.extent - step) + ");");
      }
    }
  }

  //! Copies the tile of a staged input that the group reads in this step into local memory.
  void stage_tile(int depth, const ir::Pack& p, std::int64_t items) {
    const auto& buf = w_.buffers[p.buffer];
    std::vector<const Expr*> acc;
    ir::collect_accesses(sn_->body, acc);
    const Expr* access = nullptr;
    for (auto* a : acc)
      if (a->name == buf.name) access = a;
    std::string i = fresh("i");
    line(depth, "for (" + index_ + " " + i + " = tt_item; " + i + " < " + std::to_string(p.elements()) + "; " + i +
                    " += " + std::to_string(items) + ") {");
    std::vector<std::string> coord(buf.shape.size());
    std::string cond;
    Linear flat;
    std::int64_t box_stride = 1, stride = 1;
    for (size_t d = buf.shape.size(); d-- > 0;) {
      coord[d] = fresh("c" + std::to_string(d));
      std::string c = box_stride > 1 ? "(" + i + " / " + std::to_string(box_stride) + ")" : i;
      if (d > 0) c += " % " + std::to_string(p.box[d]);
      line(depth + 1,
           "const " + index_ + " " + coord[d] + " = " + staged_origin(access->indices[d]).str() + " + " + c + ";");
      cond += (cond.empty() ? "" : " && ") + coord[d] + " >= 0 && " + coord[d] + " < " + std::to_string(buf.shape[d]);
      flat.add(coord[d], stride);
      box_stride *= p.box[d];
      stride *= buf.shape[d];
    }
    std::string element = tensor_.at(buf.name) + "[" + flat.str() + "]";
    if (const char* h = half(buf.name)) element = std::string("tt_ld_") + h + "(" + element + ")";
    line(depth + 1, staged_name_.at(buf.name) + "[" + i + "] = (" + cond + ") ? " + element + " : 0.0f;");
    line(depth, "}");
  }

  Launch stage(const ir::StageNest& sn, const std::string& kernel) {
    sn_ = &sn;
    st_ = &w_.stages[sn.stage];
    vec_axis_ = sn.vector_reduce || sn.lanes <= 1 ? "" : sn.vector_axis;
    lanes_ = vec_axis_.empty() ? 1 : sn.lanes;
    split_ = 0;
    if (lanes_ > 1 && split_vectors_) {
      split_ = std::min<std::int64_t>(lanes_, 4);  // float4: 16 bytes, the widest load
      lanes_ = 1;
    }
    names_.clear();
    tensor_.clear();
    reduce_var_.clear();
    reduce_outer_.clear();
    staged_.clear();
    staged_name_.clear();

    std::int64_t groups = 1, items = 1;
    // Body first (it decides the launch), then the signature in front of it.
    for (auto& b : w_.buffers) tensor_[b.name] = fresh(b.name);
    line(1, "const " + index_ + " tt_group = " + d_.group_id + ";");
    line(1, "const " + index_ + " tt_item = " + d_.local_id + ";");
    for (size_t b = 0; b < w_.buffers.size(); ++b)
      if (w_.buffers[b].role == ir::Buffer::Role::Temp && nest_.workspace_offset[b] >= 0)
        line(1, std::string(d_.global_ptr) + "float* " + tensor_[w_.buffers[b].name] + " = tt_ws + " +
                    std::to_string(nest_.workspace_offset[b]) + ";  // temporary");
    map_spatial_axes(1, groups, items);
    for (auto& p : sn.packs) {
      const std::string& name = w_.buffers[p.buffer].name;
      staged_[name] = &p;
      staged_name_[name] = fresh("s_" + name);
      std::string box;
      for (auto e : p.box) box += (box.empty() ? "" : " x ") + std::to_string(e);
      line(1, std::string(d_.local_decl) + (cuda_ ? " __align__(16)" : "") + " float " + staged_name_[name] + "[" +
                  std::to_string(p.elements()) + "];  // " + name + " tile: " + box);
    }
    auto pts = points();
    bool reduce = st_->is_reduction();
    std::vector<std::string> accs;
    for (auto& p : pts) {
      accs.push_back(fresh("acc" + point_suffix(p)));
      if (reduce)
        line(1, vector_type() + " " + accs.back() + " = " + widen(float_literal(ir::combine_identity(st_->combine))) +
                    ";");
    }
    int depth = 1;
    std::map<std::string, std::string> last_level;
    for (auto& l : sn.outer) {
      if (!l.reduce) continue;
      std::string v = fresh(l.axis + "_o" + std::to_string(l.level));
      std::string from = l.level == 0 ? "0" : last_level.at(l.axis);
      std::string end = l.level == 0 ? std::to_string(l.extent) : block_end(from, l.block, l.extent, "TT_MIN");
      line(depth++, "for (" + index_ + " " + v + " = " + from + "; " + v + " < " + end + "; " + v +
                        " += " + std::to_string(l.step) + ") {");
      last_level[l.axis] = v;
      reduce_outer_[l.axis] = v;
    }
    if (!sn.packs.empty()) {
      line(depth, std::string(d_.barrier) + "  // the tile of the last step is no longer read");
      for (auto& p : sn.packs) stage_tile(depth, p, items);
      line(depth, d_.barrier);
    }
    for (size_t r = 0; r < sn.reduce_inner.size(); ++r) {
      const Loop& l = sn.reduce_inner[r];
      std::string v = fresh(l.axis);
      reduce_var_[l.axis] = v;
      auto outer = last_level.find(l.axis);
      std::string from = outer == last_level.end() ? "0" : outer->second;
      std::string end =
          outer == last_level.end() ? std::to_string(l.extent) : block_end(from, l.block, l.extent, "TT_MIN");
      if (r + 1 == sn.reduce_inner.size() && sn.unroll > 0) line(depth, "#pragma unroll " + std::to_string(sn.unroll));
      line(depth++, "for (" + index_ + " " + v + " = " + from + "; " + v + " < " + end + "; ++" + v + ") {");
    }
    Block blk;
    std::vector<std::string> updates;
    for (size_t i = 0; i < pts.size(); ++i) {
      std::string v = value(sn.body, pts[i], blk, "");
      if (lane_invariant(sn.body)) v = widen(v);
      updates.push_back(reduce ? accs[i] + " = " + combine(st_->combine, accs[i], v, lanes_ > 1) + ";"
                               : "const " + vector_type() + " " + accs[i] + " = " + v + ";");
    }
    for (auto& l : blk.loads) line(depth, l);
    for (auto& u : updates) line(depth, u);
    while (depth > 1) line(--depth, "}");
    // The results, through the fused epilogue, into the stored tensor. Staged tiles are
    // stale here: the epilogue reads global memory.
    staged_.clear();
    Expr target = output_access(w_.buffers[sn.store].name);
    Block eblk;
    std::vector<std::string> finals, stores;
    for (size_t i = 0; i < pts.size(); ++i)
      finals.push_back(sn.epilogue >= 0 ? value(sn.epilogue_body, pts[i], eblk, accs[i]) : accs[i]);
    for (size_t i = 0; i < pts.size(); ++i) {
      std::string cond = inside(pts[i]);
      auto [base, flat] = address(target, pts[i]);
      std::string store = base + "[" + flat + "] = " + finals[i] + ";";
      if (lanes_ > 1)
        store = "vstore" + std::to_string(lanes_) + "(" + finals[i] + ", 0, " + base + " + " + flat + ");";
      if (const char* h = half(target.name)) {
        // Rounded lane by lane into the 16-bit words.
        store = base + "[" + flat + "] = tt_st_" + h + "(" + finals[i] + ");";
        if (lanes_ > 1) {
          store = "{ const " + vector_type() + " tt_out = " + finals[i] + ";";
          for (std::int64_t j = 0; j < lanes_; ++j)
            store += std::string(" ") + base + "[" + flat + " + " + std::to_string(j) + "] = tt_st_" + h + "(tt_out.s" +
                     "0123456789abcdef"[j] + ");";
          store += " }";
        }
      }
      if (split_ && !half(target.name) && split_aligned(target)) {
        // The lanes of one vector are consecutive points (the vector axis is the last of the
        // register tile): one store per vector, from its first point.
        std::int64_t lane = pts[i].at(vec_axis_) % split_;
        if (lane != 0) continue;
        std::string lanes;
        for (std::int64_t j = 0; j < split_; ++j) lanes += (j ? ", " : "") + finals[i + j];
        std::string type = "float" + std::to_string(split_);
        store =
            cuda_ ? "*reinterpret_cast<" + type + "*>(" + base + " + " + flat + ") = make_" + type + "(" + lanes + ");"
                  : "vstore" + std::to_string(split_) + "((" + type + ")(" + lanes + "), 0, " + base + " + " + flat +
                        ");";
      }
      stores.push_back(cond.empty() ? store : "if (" + cond + ") " + store);
    }
    for (auto& l : eblk.loads) line(1, l);
    for (auto& s : stores) line(1, s);

    std::string body = out_.str();
    out_.str("");
    out_ << "// stage " << st_->name << ": " << groups << " work-group(s) of " << items << " item(s)";
    for (auto& [n, a] : spatial_) out_ << "; " << n << ": " << a.group << " per group, " << a.reg << " per item";
    out_ << "\n";
    std::string params;
    int arg = 0;
    for (auto& b : w_.buffers) {
      if (b.role == ir::Buffer::Role::Temp) continue;
      bool input = b.role == ir::Buffer::Role::Input;
      params += std::string(arg++ ? ",\n    " : "") + d_.global_ptr + (input ? "const " : "") +
                (half(b.name) ? "TT_HALF* " : "float* ") + d_.restrict_kw + " " + tensor_[b.name];
    }
    params += std::string(arg ? ",\n    " : "") + d_.global_ptr + "float* " + d_.restrict_kw + " tt_ws";
    if (cuda_)
      out_ << d_.kernel << " void __launch_bounds__(" << items << ") " << kernel << "(\n    " << params << ") {\n";
    else
      out_ << d_.kernel << " __attribute__((reqd_work_group_size(" << items << ", 1, 1))) void " << kernel << "(\n    "
           << params << ") {\n";
    out_ << body << "}\n\n";
    return Launch{kernel, groups, items};
  }
};

}  // namespace

std::string emit_gpu_kernel(const ir::Workload& w, const ir::LoopNest& nest, const std::string& config_json,
                            GpuDialect dialect, bool split_vectors) {
  return Emitter(w, nest, dialect, split_vectors).run(config_json);
}

}  // namespace tiletune::codegen
