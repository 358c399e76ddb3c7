#pragma once

namespace kbit::detail {
// The git commit the library was built from ("+dirty": with uncommitted changes to tracked
// files; "unknown" without git), stamped into benchmark output. Written at every build by
// cmake/build_info.cmake into one generated file, so that a new commit recompiles only that.
extern const char* const kGitCommit;
}  // namespace kbit::detail
