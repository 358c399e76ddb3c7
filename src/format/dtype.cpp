#include "kbit/dtype.h"

#include <array>
#include <utility>

namespace kbit {
namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 15> kDTypes{{
    {DType::f64, "F64", 8}, {DType::f32, "F32", 4}, {DType::f16, "F16", 2}, {DType::bf16, "BF16", 2},
    {DType::f8_e4m3, "F8_E4M3", 1}, {DType::f8_e5m2, "F8_E5M2", 1}, {DType::i64, "I64", 8},
    {DType::i32, "I32", 4}, {DType::i16, "I16", 2}, {DType::i8, "I8", 1}, {DType::u64, "U64", 8},
    {DType::u32, "U32", 4}, {DType::u16, "U16", 2}, {DType::u8, "U8", 1}, {DType::boolean, "BOOL", 1},
}};
const DTypeInfo& info(DType t) { return kDTypes[static_cast<size_t>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.type;
  return std::nullopt;
}

}  // namespace kbit
