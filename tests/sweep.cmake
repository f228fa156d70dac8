# `moesim sweep` (sim/cli/cli_sweep.c, sweep_spec.c, sweep_csv.c, sweep_pool.c, sweep_mpi.c) and
# the trace cache (traces/format/trace_cache.c).  tests/sweep/sweep_test.sh holds the
# cases; `sweep.setup` makes two small traces and the 216-point reference CSV.
set(SWEEP_SH ${CMAKE_CURRENT_SOURCE_DIR}/sweep/sweep_test.sh)
set(SWEEP_DIR ${CMAKE_CURRENT_BINARY_DIR}/sweep)

function(sweep_case name)
  add_test(NAME sweep.${name} COMMAND sh ${SWEEP_SH} $<TARGET_FILE:moesim> ${SWEEP_DIR} ${ARGN})
  set_tests_properties(sweep.${name} PROPERTIES FIXTURES_REQUIRED sweep_files)
endfunction()

add_test(NAME sweep.setup COMMAND sh ${SWEEP_SH} $<TARGET_FILE:moesim> ${SWEEP_DIR} setup)
set_tests_properties(sweep.setup PROPERTIES FIXTURES_SETUP sweep_files)
sweep_case(jobs_identical jobs)
sweep_case(shards_merge shards)
sweep_case(kill_resume kill)
sweep_case(resume_bad resume_bad)
sweep_case(lock lock)
sweep_case(strict strict)
# each case writes its own folder, but sweep.bad_* share one: run them in turn
set(T "trace = @D@/a.h5")
set(C "cache_experts = 16")
set(SWEEP_BAD_CASES
  "unknown_key|1|bad.ini:4: unknown key 'cache_expert' in .sweep. .known: output, mode|${T}\\ncache_expert = 16"
  "empty_range|1|bad.ini:4: cache_experts = 64:16:8: empty range|${T}\\ncache_experts = 64:16:8"
  "empty_list|1|bad.ini:5: distance: empty list|${T}\\n${C}\\ndistance =\\n"
  "bad_number|1|bad.ini:5: distance = x: expected a number|${T}\\n${C}\\ndistance = 1, x"
  "not_whole|1|bad.ini:4: cache_experts = 1.5: expected a whole number|${T}\\ncache_experts = 1.5, 2"
  "unknown_policy|1|bad.ini:5: unknown prefetch policy 'orcale' .known: none, oracle|${T}\\n${C}\\nprefetch = none, orcale"
  "unknown_param|1|bad.ini:5: cache policy 'lfu': unknown parameter 'rest'|${T}\\n${C}\\ncache = lru, lfu:rest=1"
  "param_range|1|bad.ini:5: prefetch policy 'fmoe': capacity=0 is out of range|${T}\\n${C}\\nprefetch = fmoe:mode=code,capacity=0"
  "unknown_model|1|bad.ini:5: model = mixtral: unknown model 'mixtral'|${T}\\n${C}\\nmodel = mixtral"
  "unknown_platform|1|bad.ini:5: platform = tpu: unknown platform 'tpu'|${T}\\n${C}\\nplatform = h100-pcie5, tpu"
  "missing_trace|1|bad.ini:3: trace = /no/such.h5: .*no/such.h5|trace = /no/such.h5\\n${C}"
  "no_cache_size|1|bad.ini:0: no cache size|${T}"
  "two_cache_sizes|1|bad.ini:5: give one of cache_experts, cache_bytes, cache_gb|${T}\\n${C}\\ncache_gb = 8"
  "repeated_key|1|bad.ini:5: key 'cache_experts' given twice|${T}\\n${C}\\ncache_experts = 32"
  "bad_mode|1|bad.ini:3: mode = grid: expected product or list|mode = grid\\n${T}\\n${C}"
  "point_needs_list|1|bad.ini:5: .point. sections need mode = list|${T}\\n${C}\\n[point]\\nprefetch = oracle"
  "unknown_section|1|bad.ini:5: unknown section .grid.|${T}\\n${C}\\n[grid]"
  "bad_bytes|1|bad.ini:4: cache_bytes = 4 parsecs: expected a size|${T}\\ncache_bytes = 4 parsecs"
  "bad_train|1|bad.ini:5: train = 1: expected auto or a fraction|${T}\\n${C}\\ntrain = auto, 1"
  "huge_trace_cache|1|bad.ini:5: trace_cache = 13333333333333333MiB: expected a size such as 2GiB|${T}\\n${C}\\ntrace_cache = 13333333333333333MiB"
  "bad_fill|1|bad.ini:5: topk_fill = half: expected one of zero.even|${T}\\n${C}\\ntopk_fill = half"
  "unwritable_output|1|sweep: output /no/such/dir/out.csv: folder /no/such/dir: No such file or directory|${T}\\n${C}|-o|/no/such/dir/out.csv"
  "shard_out_of_range|2|--shard 2/2: shard index 2 out of range|${T}\\n${C}|--shard|2/2"
  "bad_jobs|2|--jobs 0: expected a whole number|${T}\\n${C}|--jobs|0"
  "dry_output_is_spec|1|^moesim: sweep: output ${SWEEP_DIR}/bad/bad.ini: is the input file .*bad.ini. refusing to overwrite it$|${T}\\n${C}|--dry-run|-o|${SWEEP_DIR}/bad/bad.ini"
  "dry_output_is_trace|1|^moesim: sweep: output ${SWEEP_DIR}/a.h5: is the input file .*a.h5. refusing to overwrite it$|${T}\\n${C}|--dry-run|-o|${SWEEP_DIR}/a.h5"
  "dry_output_is_folder|1|^moesim: sweep: output ${SWEEP_DIR}: is a directory|${T}\\n${C}|--dry-run|-o|${SWEEP_DIR}"
  "dry_output_exists|1|^moesim: ${SWEEP_DIR}/full.csv exists. use --resume or remove it$|${T}\\n${C}|--dry-run|-o|${SWEEP_DIR}/full.csv")
set(prev "")
foreach(c IN LISTS SWEEP_BAD_CASES)
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 code)
  list(GET parts 2 regex)
  list(GET parts 3 body)
  list(LENGTH parts n)
  set(extra "")
  if(n GREATER 4)
    list(SUBLIST parts 4 -1 extra)
  endif()
  sweep_case(bad_${name} bad ${code} "${regex}" "${body}" ${extra})
  if(prev)
    set_tests_properties(sweep.bad_${name} PROPERTIES DEPENDS sweep.bad_${prev})
  endif()
  set(prev ${name})
endforeach()
# good specs: ranges with byte suffixes, policy parameters after commas,
# mode = list (each [point] a product of its own keys, the rest from [sweep])
sweep_case(dry_product dry 24 "${T}\\ncache_bytes = 1GiB:4GiB:1GiB\\nprefetch = none, fmoe:mode=code,capacity=50, oracle\\ndistance = 1,\\n  2")
sweep_case(dry_list dry 5 "mode = list\\n${T}\\n${C}\\n[point]\\nprefetch = oracle\\ndistance = 1:3:1\\n[point]\\ncache_gb = 4, 8\\n")
set_tests_properties(sweep.dry_list PROPERTIES DEPENDS sweep.dry_product)
add_test(NAME sweep.help COMMAND moesim sweep --help)
set_tests_properties(sweep.help PROPERTIES PASS_REGULAR_EXPRESSION "--shard I/N.*mode = product.*h2d_gbps")

# one decompression of the trace per worker process (LD_PRELOAD shim of
# tests/trace_io.cmake; not under the sanitizers)
if(NOT MOESIM_SANITIZE)
  sweep_case(trace_cache_once cache $<TARGET_FILE:trace_io_count_zstd>)
endif()

# --mpi: under mpirun when built with -DMOESIM_MPI=ON (Open MPI: root in CI
# containers, 2 and 3 ranks on any core count, -q: no banner of mpirun's own on a
# failing rank), else the one-line error of a build without MPI
if(MOESIM_MPI)
  sweep_case(mpi mpi ${MPIEXEC_NUMPROC_FLAG} ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -q)
else()
  add_test(NAME sweep.mpi_not_built COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh 2
           "^moesim: sweep: --mpi: not built with MPI \\(configure with -DMOESIM_MPI=ON\\)$"
           $<TARGET_FILE:moesim> sweep spec.ini --mpi)
endif()
