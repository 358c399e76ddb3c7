// kbit::Error: every failure the library reports is one of these, with a message
// that names the problem (which argument, which tensor, which value).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kbit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

// Throws kbit::Error built from the streamed arguments when `cond` is false.
#define KBIT_REQUIRE(cond, ...)                                  \
  do {                                                           \
    if (!(cond)) throw ::kbit::Error(::kbit::detail::concat(__VA_ARGS__)); \
  } while (0)

}  // namespace kbit
