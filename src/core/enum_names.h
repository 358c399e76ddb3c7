// Names of an enum's values in one table, so that printing, parsing and the parse error's
// list of valid names cannot drift apart (linear paths and item modes, skinny loaders,
// stream sources).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "kbit/error.h"

namespace kbit::detail {

template <typename E, size_t N>
struct EnumNames {
  std::string_view what;  // e.g. "linear path", for the parse error
  std::array<std::pair<E, std::string_view>, N> names;

  // The names are string literals: data() is null-terminated.
  constexpr std::string_view name(E e) const {
    for (const auto& [v, n] : names)
      if (v == e) return n;
    return "?";
  }

  E parse(std::string_view s) const {
    for (const auto& [v, n] : names)
      if (n == s) return v;
    std::string list;
    for (size_t i = 0; i < N; ++i) list += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(names[i].second);
    throw Error(concat("unknown ", what, " '", s, "' (expected ", list, ")"));
  }
};

}  // namespace kbit::detail
