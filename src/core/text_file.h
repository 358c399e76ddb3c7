// A small text file (a shape set, a tuned table, a config.json) read whole.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "kbit/error.h"

namespace kbit::detail {

// The file's bytes; an error names the file and what it was meant to be ("the tuned table").
inline std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  KBIT_REQUIRE(in.good(), path, ": cannot open ", what);
  std::ostringstream text;
  text << in.rdbuf();
  KBIT_REQUIRE(!in.bad(), path, ": cannot read ", what);
  return text.str();
}

}  // namespace kbit::detail
