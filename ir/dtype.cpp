#include "ir/dtype.hpp"

#include <cmath>
#include <cstring>

namespace tiletune::ir {

namespace {
struct Info {
  DType type;
  const char* name;
  int bytes;
  bool integer;
  double roundoff;
  double lo, hi;
  const char* cpu;
};
// The one table of what each type is.
constexpr Info kTypes[] = {
    {DType::F32, "f32", 4, false, 0x1p-24, -INFINITY, INFINITY, "float"},
    {DType::BF16, "bf16", 2, false, 0x1p-8, -INFINITY, INFINITY, "tt_bf16"},
    {DType::F16, "f16", 2, false, 0x1p-11, -65504.0, 65504.0, "tt_f16"},
    {DType::I32, "i32", 4, true, 0, -2147483648.0, 2147483647.0, "tt_i32"},
    {DType::I8, "i8", 1, true, 0, -128.0, 127.0, "tt_i8"},
    {DType::U8, "u8", 1, true, 0, 0.0, 255.0, "tt_u8"},
};
const Info& info(DType t) { return kTypes[static_cast<int>(t)]; }
}  // namespace

const char* dtype_name(DType t) { return info(t).name; }

bool parse_dtype(const std::string& name, DType& out) {
  for (auto& i : kTypes)
    if (name == i.name) {
      out = i.type;
      return true;
    }
  return false;
}

int dtype_bytes(DType t) { return info(t).bytes; }
bool is_integer(DType t) { return info(t).integer; }
DType compute_type(DType t) { return is_integer(t) ? DType::I32 : DType::F32; }
DType promote(DType a, DType b) {
  return compute_type(a) == DType::I32 && compute_type(b) == DType::I32 ? DType::I32 : DType::F32;
}
double unit_roundoff(DType t) { return info(t).roundoff; }
double dtype_min(DType t) { return info(t).lo; }
double dtype_max(DType t) { return info(t).hi; }
const char* cpu_storage_type(DType t) { return info(t).cpu; }

double load_element(DType t, const void* data, std::int64_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(data)[i];
    case DType::BF16: {
      std::uint32_t u = static_cast<std::uint32_t>(static_cast<const std::uint16_t*>(data)[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DType::F16:
      return static_cast<float>(static_cast<const _Float16*>(data)[i]);
    case DType::I32:
      return static_cast<const std::int32_t*>(data)[i];
    case DType::I8:
      return static_cast<const std::int8_t*>(data)[i];
    case DType::U8:
      return static_cast<const std::uint8_t*>(data)[i];
  }
  return 0;
}

void store_element(DType t, void* data, std::int64_t i, double v) {
  if (is_integer(t)) {
    double r = std::isnan(v) ? 0 : std::nearbyint(std::fmin(std::fmax(v, dtype_min(t)), dtype_max(t)));
    if (t == DType::I32) static_cast<std::int32_t*>(data)[i] = static_cast<std::int32_t>(r);
    if (t == DType::I8) static_cast<std::int8_t*>(data)[i] = static_cast<std::int8_t>(r);
    if (t == DType::U8) static_cast<std::uint8_t*>(data)[i] = static_cast<std::uint8_t>(r);
    return;
  }
  float f = static_cast<float>(v);
  if (t == DType::F32) {
    static_cast<float*>(data)[i] = f;
  } else if (t == DType::F16) {
    static_cast<_Float16*>(data)[i] = static_cast<_Float16>(f);
  } else {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    static_cast<std::uint16_t*>(data)[i] = f != f ? static_cast<std::uint16_t>((u >> 16) | 0x40)
                                                  : static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
}

}  // namespace tiletune::ir
