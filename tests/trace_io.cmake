# Trace format v1 (traces/format/trace_h5*.c): interop with h5py and the
# `moesim trace info` / `moesim trace validate` CLI on good and broken files.
#
# unit.test_trace_io leaves its fixture traces in the tests build folder
# (FIXTURES_SETUP trace_io_files); write_with_h5py.py makes one more.
#
# Run with `cmake -P` this file is also the checker of one CLI call: it runs
# CMD (arguments separated by "@@"), requires exit code EXPECT_RC, every
# "@@"-separated regex of EXPECT_OUT on stdout and of EXPECT_ERR on stderr,
# and, for a failing call, exactly one line on stderr.

if(CMAKE_SCRIPT_MODE_FILE)
  string(REPLACE "@@" ";" cmd "${CMD}")
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "exit ${rc}\nstdout:\n${out}stderr:\n${err}")
  if(NOT rc STREQUAL "${EXPECT_RC}")
    message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}")
  endif()
  foreach(stream out err)
    string(TOUPPER "${stream}" s)
    if(DEFINED EXPECT_${s})
      string(REPLACE "@@" ";" regexes "${EXPECT_${s}}")
      foreach(re IN LISTS regexes)
        if(NOT "${${stream}}" MATCHES "${re}")
          message(FATAL_ERROR "std${stream} does not match '${re}'")
        endif()
      endforeach()
    endif()
  endforeach()
  if(NOT EXPECT_RC STREQUAL "0")
    string(REGEX MATCHALL "\n" newlines "${err}")
    list(LENGTH newlines n)
    if(NOT n EQUAL 1 OR NOT err MATCHES "^moesim: ")
      message(FATAL_ERROR "a failure must print exactly one line 'moesim: ...' on stderr")
    endif()
  endif()
  return()
endif()

set(TRACE_IO_DIR ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(unit.test_trace_io PROPERTIES FIXTURES_SETUP trace_io_files)

# One CLI call checked by this file in script mode.
function(trace_io_cli name rc args)
  cmake_parse_arguments(PARSE_ARGV 3 T "" "" "OUT;ERR;FIXTURES")
  string(REPLACE ";" "@@" out "${T_OUT}")
  string(REPLACE ";" "@@" err "${T_ERR}")
  set(defs -DCMD=$<TARGET_FILE:moesim>@@${args} -DEXPECT_RC=${rc})
  if(T_OUT)
    list(APPEND defs "-DEXPECT_OUT=${out}")
  endif()
  if(T_ERR)
    list(APPEND defs "-DEXPECT_ERR=${err}")
  endif()
  add_test(NAME trace_io.cli.${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(trace_io.cli.${name} PROPERTIES WORKING_DIRECTORY ${TRACE_IO_DIR}
    FIXTURES_REQUIRED "${T_FIXTURES}")
endfunction()

# ---- h5py interop ----
if(MOESIM_PYTHON)
  foreach(kind topk full)
    add_test(NAME trace_io.interop.h5py_read_${kind}
      COMMAND ${MOESIM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/read_with_h5py.py
              trace_io_${kind}.h5 trace_io_${kind}.json)
    set_tests_properties(trace_io.interop.h5py_read_${kind} PROPERTIES WORKING_DIRECTORY ${TRACE_IO_DIR}
      FIXTURES_REQUIRED trace_io_files PASS_REGULAR_EXPRESSION "trace_io_${kind}.h5: ok \\(2 requests")
  endforeach()
  if(MOESIM_H5PLUGIN_FILTER)
    # The issue's promise: plain h5py + hdf5plugin decode moesim traces.
    add_test(NAME trace_io.interop.hdf5plugin_filter
      COMMAND ${MOESIM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/read_with_h5py.py
              trace_io_topk.h5 trace_io_topk.json)
    set_tests_properties(trace_io.interop.hdf5plugin_filter PROPERTIES WORKING_DIRECTORY ${TRACE_IO_DIR}
      FIXTURES_REQUIRED trace_io_files PASS_REGULAR_EXPRESSION "read via h5py \\+ hdf5plugin\\)")
  endif()
  add_test(NAME trace_io.interop.h5py_write
    COMMAND ${MOESIM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/write_with_h5py.py trace_io_from_h5py.h5)
  set_tests_properties(trace_io.interop.h5py_write PROPERTIES WORKING_DIRECTORY ${TRACE_IO_DIR}
    FIXTURES_SETUP trace_io_pyfile)
  trace_io_cli(validate_h5py_written 0 "trace@@validate@@trace_io_from_h5py.h5" FIXTURES trace_io_pyfile
    OUT "^trace_io_from_h5py.h5: ok \\(2 requests, 5 iterations, 7 rows, 0 missing cells\\)\n$")
  trace_io_cli(info_h5py_written 0 "trace@@info@@trace_io_from_h5py.h5" FIXTURES trace_io_pyfile
    OUT "model: +h5py-written\n" "probs kind: +full\n" "optional: +embedding\\[3\\] token_ids text\n"
        "expert bytes: +min 2654208, max 3059712\n")
endif()

# ---- info ----
trace_io_cli(info_topk 0 "trace@@info@@trace_io_topk.h5" FIXTURES trace_io_files
  OUT "model: +tiny-moe\n" "source: +test_trace_io hand-built\n" "layers \\(L\\): +3\n" "experts \\(J\\): +8\n"
      "top-k \\(K\\): +2\n" "probs kind: +topk_renorm\n" "requests: +2\n"
      "iterations: +5 \\(2 prefill, 3 decode\\)\n" "rows: +8\n" "layer-steps: +15\n"
      "optional: +embedding\\[4\\] spec\\[1\\] token_ids text recorded_hit\n"
      "expert bytes: +min 1000, max 2000\n")
trace_io_cli(info_json 0 "trace@@info@@trace_io_full.h5@@--json" FIXTURES trace_io_files
  OUT "^{\"file\":\"trace_io_full.h5\",\"model\":\"tiny-full\",.*\"L\":2,\"J\":4,\"K\":2,.*\"probs_kind\":\"full\",\"requests\":2,\"iterations\":4,\"prefill_iterations\":2,\"decode_iterations\":2,\"rows\":5,\"layer_steps\":8,\"embed_dim\":0,\"spec_depth\":0,\"token_ids\":false,\"text\":false,\"recorded_hit\":false,\"expert_bytes_min\":4096,\"expert_bytes_max\":4096,.*}\n$")
trace_io_cli(info_help 0 "trace@@info@@--help" OUT "^usage: moesim trace info FILE \\[--json\\]")
trace_io_cli(info_no_file 2 "trace@@info" ERR "^moesim: info: missing FILE")
trace_io_cli(info_bad_option 2 "trace@@info@@x.h5@@--yaml" ERR "^moesim: info: unknown option '--yaml'")
trace_io_cli(info_truncated 1 "trace@@info@@trace_io_truncated.h5" FIXTURES trace_io_files
  ERR "^moesim: trace_io_truncated.h5: cannot open the HDF5 file \\(HDF5: truncated file")
trace_io_cli(info_not_hdf5 1 "trace@@info@@${CMAKE_CURRENT_LIST_FILE}"
  ERR "^moesim: .*trace_io.cmake: not an HDF5 file")

# ---- validate ----
# trace_io_topk.h5: request 7 has a missing (row 1, layer 2) cell of K = 2 ids
# and one more missing id at (row 2, layer 0): 3 missing cells.
trace_io_cli(validate_topk 0 "trace@@validate@@trace_io_topk.h5" FIXTURES trace_io_files
  OUT "^trace_io_topk.h5: ok \\(2 requests, 5 iterations, 8 rows, 3 missing cells\\)\n$")
trace_io_cli(validate_full 0 "trace@@validate@@trace_io_full.h5" FIXTURES trace_io_files
  OUT "^trace_io_full.h5: ok \\(2 requests, 4 iterations, 5 rows, 0 missing cells\\)\n$")
trace_io_cli(validate_help 0 "trace@@validate@@--help" OUT "^usage: moesim trace validate FILE\n")
trace_io_cli(validate_two_files 2 "trace@@validate@@a.h5@@b.h5" ERR "^moesim: validate: more than one FILE")
trace_io_cli(validate_missing 1 "trace@@validate@@trace_io_no_such_file.h5"
  ERR "^moesim: trace_io_no_such_file.h5: cannot open: No such file or directory\n$")
trace_io_cli(validate_not_hdf5 1 "trace@@validate@@${CMAKE_CURRENT_LIST_FILE}"
  ERR "^moesim: .*trace_io.cmake: not an HDF5 file")
trace_io_cli(validate_truncated 1 "trace@@validate@@trace_io_truncated.h5" FIXTURES trace_io_files
  ERR "^moesim: trace_io_truncated.h5: cannot open the HDF5 file \\(HDF5: truncated file")
trace_io_cli(validate_bad_shape 1 "trace@@validate@@trace_io_badshape.h5" FIXTURES trace_io_files
  ERR "^moesim: trace_io_badshape.h5: /rows/topk_w: shape \\[8, 3, 3\\], expected \\[R, L, K\\] = \\[8, 3, 2\\]\n$")
trace_io_cli(validate_negative_prob 1 "trace@@validate@@trace_io_negprob.h5" FIXTURES trace_io_files
  ERR "^moesim: trace_io_negprob.h5: request 2 row 0 layer 0: probs\\[2\\] = -0.5 not a probability\n$")

# ---- streaming: every chunk is decompressed exactly once ----
# trace_io_many.h5 (900 requests, 5391 iterations, 12583 rows, 8000-odd tokens)
# has 26 chunks: topk_ids, topk_w, spec_ids, spec_w (24-byte rows, 10922 rows
# a chunk) 2 each; recorded_hit 1; the four /iterations datasets 1 each;
# /tokens/ids 1; ten /requests columns 1 each; two /layers datasets 1 each.
# (An LD_PRELOAD shim cannot be used under the sanitizers.)
if(NOT MOESIM_SANITIZE)
  add_library(trace_io_count_zstd SHARED ${CMAKE_CURRENT_LIST_DIR}/interop/count_zstd_calls.c)
  target_link_libraries(trace_io_count_zstd PRIVATE ${CMAKE_DL_LIBS})
  target_include_directories(trace_io_count_zstd PRIVATE ${DEPS_INCLUDE_DIRS})
  add_test(NAME trace_io.cli.validate_decompresses_once
    COMMAND ${CMAKE_COMMAND}
      "-DCMD=${CMAKE_COMMAND}@@-E@@env@@LD_PRELOAD=$<TARGET_FILE:trace_io_count_zstd>@@$<TARGET_FILE:moesim>@@trace@@validate@@trace_io_many.h5"
      -DEXPECT_RC=0
      "-DEXPECT_OUT=^trace_io_many.h5: ok \\(900 requests, 5391 iterations, 12583 rows, 0 missing cells\\)\n$"
      "-DEXPECT_ERR=^ZSTD_decompress calls: 26\n$"
      -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(trace_io.cli.validate_decompresses_once PROPERTIES WORKING_DIRECTORY ${TRACE_IO_DIR}
    FIXTURES_REQUIRED trace_io_files)
endif()
