# Writes OUT (a C++ file defining kbit::detail::kGitCommit) from the source tree's git HEAD at
# every build, marked "+dirty" when tracked files differ from it, or from FALLBACK where there
# is no git (-DKBIT_GIT_COMMIT=...). Only that one file then recompiles after a commit, and
# the stamp in benchmark output names the tree the binary was built from.
# Usage: cmake -DSRC=dir -DOUT=file -DFALLBACK=text -P build_info.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(rc EQUAL 0 AND commit)
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    string(APPEND commit "+dirty")
  endif()
else()
  set(commit "${FALLBACK}")
endif()
set(text "// Generated at build time by cmake/build_info.cmake: do not edit.\n#include \"core/build_info.h\"\nnamespace kbit::detail {\nconst char* const kGitCommit = \"${commit}\";\n}\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
