# `moesim --version` and `moesim version`: "moesim <VERSION> (commit <sha>)",
# sha = `git rev-parse HEAD` of the source tree (plus "-dirty" when tracked
# files differ) when it is in git, else "unknown".
#   cmake -DMOESIM=<exe> -DVERSION=<x.y.z> -DSRC=<source dir> -DGIT=<git or empty> -P version_test.cmake
set(head "")
if(GIT)
  execute_process(COMMAND "${GIT}" -C "${SRC}" rev-parse --verify -q HEAD RESULT_VARIABLE rc
                  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  # as cmake/build_info.cmake: only when git tracks the sources
  execute_process(COMMAND "${GIT}" -C "${SRC}" ls-files --error-unmatch -- CMakeLists.txt RESULT_VARIABLE rc2
                  OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT rc2 EQUAL 0)
    set(head "")
  endif()
endif()
foreach(arg --version version)
  execute_process(COMMAND "${MOESIM}" ${arg} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
    message(FATAL_ERROR "moesim ${arg}: exit ${rc}, stderr '${err}'")
  endif()
  string(REPLACE "." "\\." v "${VERSION}")
  if(NOT out MATCHES "^moesim ${v} \\(commit ([0-9a-f]+(-dirty)?|unknown)\\)\n$")
    message(FATAL_ERROR "moesim ${arg}: unexpected output '${out}'")
  endif()
  set(commit "${CMAKE_MATCH_1}")
  string(REGEX REPLACE "-dirty$" "" sha "${commit}")
  if(head)
    if(NOT sha STREQUAL head)
      message(FATAL_ERROR "moesim ${arg}: commit ${commit}, but git rev-parse HEAD is ${head} (rebuild after committing?)")
    endif()
  elseif(NOT commit STREQUAL "unknown")
    message(FATAL_ERROR "moesim ${arg}: commit ${commit} outside git")
  endif()
  message(STATUS "ok: moesim ${arg}: ${out}")
endforeach()
