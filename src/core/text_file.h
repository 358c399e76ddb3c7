// A small text file (a shape set, a tuned table, a config.json) read whole.
#pragma once

#include <cstdio>
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

// Writes `text` to PATH.partial, then renames it to `path`: a reader never sees half a file, and a
// failed write leaves the old one (a tuned table rewritten after every case, a shape set).
inline void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary);
    KBIT_REQUIRE(out.good(), "cannot write ", tmp);
    out << text;
    KBIT_REQUIRE(out.good(), "writing ", tmp, " failed");
  }
  KBIT_REQUIRE(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot replace ", path);
}

}  // namespace kbit::detail
