# CLI tests of the jsonl, dense-csv and npy importers and of `moesim trace
# workload`: tiny fixtures (tests/data/jsonl, tests/data/densecsv) and
# malformed inputs written here into the build tree; every failure must be
# exit 1 with one line naming file, line / dataset and value, and leave no
# output file.  import_cli_test comes from tests/import.cmake.
set(FMT_DATA "${CMAKE_CURRENT_SOURCE_DIR}/data")
set(FMT_OUT "${CMAKE_CURRENT_BINARY_DIR}/import_formats")
set(FMT_FAIL "${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh")
file(MAKE_DIRECTORY "${FMT_OUT}")
set(JL "trace|import|--format|jsonl|--experts|4|--expert-bytes|1MiB")
set(DC "trace|import|--format|dense-csv|--topk|2|--expert-bytes|1000")

# ---- jsonl ----
import_cli_test(jsonl_small 0
  "imported small.jsonl: 2 requests, 2 prefill iterations (3 token rows) + 2 decode iterations, 9 JSON lines; 2 missing cells (16.7 % of prefill cells), first: request 7 step 1 layer 1 slot 0, request 7 step 1 layer 1 slot 1"
  "${JL}|${FMT_DATA}/jsonl/small.jsonl|${FMT_OUT}/jsonl_small.h5")
set_tests_properties(cli.import.jsonl_small PROPERTIES FIXTURES_SETUP fmt_jsonl)
add_test(NAME cli.import.validate_jsonl_small COMMAND moesim trace validate "${FMT_OUT}/jsonl_small.h5")
set_tests_properties(cli.import.validate_jsonl_small PROPERTIES FIXTURES_REQUIRED fmt_jsonl
  PASS_REGULAR_EXPRESSION "ok \\(2 requests, 4 iterations, 5 rows, 2 missing cells\\)")
# renamed fields + --prompt-len (no phase field) + a model profile
file(WRITE "${FMT_OUT}/renamed.jsonl"
  "{\"rid\": 1, \"pos\": 0, \"lyr\": 0, \"ids\": [3, 5], \"w\": [0.5, 0.5]}\n"
  "{\"rid\": 1, \"pos\": 1, \"lyr\": 0, \"ids\": [0, 7], \"w\": [0.7, 0.3]}\n")
import_cli_test(jsonl_fields 0
  "1 request, 1 prefill iteration (1 token rows) + 1 decode iterations, 2 JSON lines; 124 missing cells (96.9 % of prefill cells, 96.9 % of decode cells), first: step 0 layer 1 slot 0"
  "trace|import|--format|jsonl|--model|mixtral-8x7b|--prompt-len|1|--fields|request=rid,token=pos,layer=lyr,experts=ids,weights=w|${FMT_OUT}/renamed.jsonl|${FMT_OUT}/renamed.h5")

# malformed jsonl (each: exit 1, file:line: field: value, no output)
set(_bad_json_cases
  "bad_json|{\"request_id\": 0, \"token_idx\": 0,, }|bad_json.jsonl:1: bad JSON at column"
  "bad_weight|{\"request_id\": 0, \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, \"x\"], \"is_prompt\": true}|bad_weight.jsonl:1: field topk_weights: value \"x\" is not a number in .0, 1."
  "huge_weight|{\"request_id\": 0, \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [1e400, 0.5], \"is_prompt\": true}|huge_weight.jsonl:1: field topk_weights: value 1e309 or more \\(out of range\\) is not a number in .0, 1.$"
  "bad_expert|{\"request_id\": 0, \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 4], \"topk_weights\": [0.5, 0.5], \"is_prompt\": true}|bad_expert.jsonl:1: field topk_ids: expert id 4 out of range .0, 4\\)"
  "bad_count|{\"request_id\": 0, \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5], \"is_prompt\": true}\n{\"request_id\": 0, \"token_idx\": 0, \"layer\": 1, \"topk_ids\": [1], \"topk_weights\": [1], \"is_prompt\": true}|bad_count.jsonl:2: field topk_ids: 1 entries, expected K=2"
  "bad_sum|{\"request_id\": 0, \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.2], \"is_prompt\": true}|bad_sum.jsonl:1: field topk_weights: weights sum to 0.7, expected 1"
  "no_phase|{\"request_id\": 0, \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5]}|no_phase.jsonl:1: field is_prompt: missing \\(a dump without a phase field: --prompt-len P when tokens < P are the prompt, --phase decode")
foreach(c ${_bad_json_cases})
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 body)
  list(GET parts 2 msg)
  file(WRITE "${FMT_OUT}/${name}.jsonl" "${body}\n")
  add_test(NAME cli.import.jsonl_${name} COMMAND sh ${FMT_FAIL} 1 "${msg}"
    $<TARGET_FILE:moesim> trace import --format jsonl --experts 4 --expert-bytes 1 ${FMT_OUT}/${name}.jsonl ${FMT_OUT}/${name}.h5)
endforeach()
# a decode line before a prompt token of the same request
file(WRITE "${FMT_OUT}/phase_order.jsonl"
  "{\"request_id\": 2, \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5], \"is_prompt\": false}\n"
  "{\"request_id\": 2, \"token_idx\": 1, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5], \"is_prompt\": true}\n")
add_test(NAME cli.import.jsonl_phase_order COMMAND sh ${FMT_FAIL} 1
  "phase_order.jsonl:2: field is_prompt: prompt token 1 of request 2 comes after decode token 0 \\(line 1\\)"
  $<TARGET_FILE:moesim> trace import --format jsonl --experts 4 --expert-bytes 1 ${FMT_OUT}/phase_order.jsonl ${FMT_OUT}/phase_order.h5)
file(WRITE "${FMT_OUT}/empty.jsonl" "\n\n")
add_test(NAME cli.import.jsonl_empty COMMAND sh ${FMT_FAIL} 1 "empty.jsonl: empty file \\(no JSON lines\\)"
  $<TARGET_FILE:moesim> trace import --format jsonl --experts 4 --expert-bytes 1 ${FMT_OUT}/empty.jsonl ${FMT_OUT}/empty.h5)
import_cli_test(jsonl_no_experts 1 "number of experts is unknown: give --model PROFILE or --experts J"
  "trace|import|--format|jsonl|--expert-bytes|1|${FMT_DATA}/jsonl/small.jsonl|${FMT_OUT}/x_l58.h5")
import_cli_test(jsonl_model_conflict 1 "--experts 4 contradicts model mixtral-8x7b (8)"
  "trace|import|--format|jsonl|--model|mixtral-8x7b|--experts|4|${FMT_DATA}/jsonl/small.jsonl|${FMT_OUT}/x_l60.h5")
import_cli_test(routecsv_no_opts 2 "--format route-csv takes no model or field options"
  "trace|import|--format|route-csv|--experts|4|${FMT_DATA}/routecsv/small.csv|${FMT_OUT}/x_l62.h5")

# 2 GB of garbage: a sparse file (no disk), each reader must stop at byte 1
# (a 1 MiB line cap guards non-NUL garbage); TIMEOUT 10 s proves it is not read whole.
foreach(fmt jsonl dense-csv npy workload)
  if(fmt STREQUAL "dense-csv")
    set(g "${FMT_OUT}/garbage_dir")
    set(gfile "${g}/layer0.csv")
    set(cmd "$<TARGET_FILE:moesim> trace import --format dense-csv --topk 2 --expert-bytes 1 ${g} ${FMT_OUT}/g.h5")
    set(msg "layer0.csv:1: NUL byte at column 1")
  elseif(fmt STREQUAL "workload")
    set(gfile "${FMT_OUT}/garbage_azure.csv")
    set(cmd "$<TARGET_FILE:moesim> trace workload ${FMT_OUT}/jsonl_small.h5 --azure ${gfile} -o ${FMT_OUT}/g.h5")
    set(msg "garbage_azure.csv:1: NUL byte at column 1")
  else()
    set(gfile "${FMT_OUT}/garbage_${fmt}")
    set(cmd "$<TARGET_FILE:moesim> trace import --format ${fmt} --experts 4 --topk 2 --expert-bytes 1 ${gfile} ${FMT_OUT}/g.h5")
    if(fmt STREQUAL "npy")
      set(msg "garbage_npy: not a .npy file")
    else()
      set(msg "garbage_jsonl:1: NUL byte at column 1")
    endif()
  endif()
  add_test(NAME cli.import.garbage_2gb_${fmt} COMMAND sh -c
    "mkdir -p ${FMT_OUT}/garbage_dir && truncate -s 2G ${gfile} && sh ${FMT_FAIL} 1 '${msg}' ${cmd}; rc=$?; rm -f ${gfile}; exit $rc")
  set_tests_properties(cli.import.garbage_2gb_${fmt} PROPERTIES TIMEOUT 10 RESOURCE_LOCK fmt_garbage)
endforeach()
set_tests_properties(cli.import.garbage_2gb_workload PROPERTIES FIXTURES_REQUIRED fmt_jsonl)

# ---- dense-csv ----
import_cli_test(densecsv_small 0
  "imported small: 2 requests, 2 prefill iterations (3 token rows) + 1 decode iterations, 4 CSV rows per layer; no missing cells"
  "${DC}|${FMT_DATA}/densecsv/small|${FMT_OUT}/dense_small.h5")
set_tests_properties(cli.import.densecsv_small PROPERTIES FIXTURES_SETUP fmt_dense)
add_test(NAME cli.import.validate_densecsv_small COMMAND moesim trace validate "${FMT_OUT}/dense_small.h5")
set_tests_properties(cli.import.validate_densecsv_small PROPERTIES FIXTURES_REQUIRED fmt_dense
  PASS_REGULAR_EXPRESSION "ok \\(2 requests, 3 iterations, 4 rows, 0 missing cells\\)")
# malformed: each case is a directory with layer0.csv (and layer1.csv / layer3.csv)
set(_h "e0,e1,e2\n")
set(_dense_cases
  "columns|${_h}0.2,0.3,0.5\n0.5,0.5\n|layer0.csv:3: 2 columns, expected 3"
  "nonnum|${_h}0.2,abc,0.5\n|layer0.csv:2: column 2 \\(expert 1\\): 'abc' is not a finite number >= 0"
  "sum|${_h}0.2,0.2,0.2\n|layer0.csv:2: probabilities sum to 0.6, expected 1"
  "empty||layer0.csv: empty file"
  "norows|${_h}|layer0.csv: no data rows after the header")
foreach(c ${_dense_cases})
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 body)
  list(GET parts 2 msg)
  file(MAKE_DIRECTORY "${FMT_OUT}/dense_${name}")
  file(WRITE "${FMT_OUT}/dense_${name}/layer0.csv" "${body}")
  add_test(NAME cli.import.densecsv_${name} COMMAND sh ${FMT_FAIL} 1 "${msg}"
    $<TARGET_FILE:moesim> trace import --format dense-csv --topk 2 --expert-bytes 1 ${FMT_OUT}/dense_${name} ${FMT_OUT}/dense_${name}.h5)
endforeach()
file(MAKE_DIRECTORY "${FMT_OUT}/dense_gap")
file(WRITE "${FMT_OUT}/dense_gap/layer0.csv" "${_h}0.2,0.3,0.5\n")
file(WRITE "${FMT_OUT}/dense_gap/layer2.csv" "${_h}0.2,0.3,0.5\n")
add_test(NAME cli.import.densecsv_layer_gap COMMAND sh ${FMT_FAIL} 1
  "dense_gap: layer gap: no file layer1.csv \\(layers found up to 2\\)"
  $<TARGET_FILE:moesim> trace import --format dense-csv --topk 2 --expert-bytes 1 ${FMT_OUT}/dense_gap ${FMT_OUT}/dense_gap.h5)
file(MAKE_DIRECTORY "${FMT_OUT}/dense_short")
file(WRITE "${FMT_OUT}/dense_short/layer0.csv" "${_h}0.2,0.3,0.5\n0.2,0.3,0.5\n")
file(WRITE "${FMT_OUT}/dense_short/layer1.csv" "${_h}0.2,0.3,0.5\n")
add_test(NAME cli.import.densecsv_short_layer COMMAND sh ${FMT_FAIL} 1
  "layer1.csv: 1 data rows, layer0.csv has more"
  $<TARGET_FILE:moesim> trace import --format dense-csv --topk 2 --expert-bytes 1 ${FMT_OUT}/dense_short ${FMT_OUT}/dense_short.h5)

# ---- npy (needs NumPy + h5py + hdf5plugin: the .venv) ----
if(MOESIM_H5PLUGIN_FILTER)
  add_test(NAME cli.import.npy_roundtrip
    COMMAND ${MOESIM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/npy_roundtrip.py $<TARGET_FILE:moesim> ${FMT_OUT}/npy)
  set_tests_properties(cli.import.npy_roundtrip PROPERTIES ENVIRONMENT "MOESIM_PYTHON=${MOESIM_PYTHON}")
endif()
file(WRITE "${FMT_OUT}/empty.npy" "")
add_test(NAME cli.import.npy_empty COMMAND sh ${FMT_FAIL} 1 "empty.npy: not a .npy file"
  $<TARGET_FILE:moesim> trace import --format npy --topk 2 --expert-bytes 1 ${FMT_OUT}/empty.npy ${FMT_OUT}/empty_npy.h5)
set_tests_properties(cli.import.npy_empty PROPERTIES ENVIRONMENT "MOESIM_PYTHON=${MOESIM_PYTHON}")
set_tests_properties(cli.import.garbage_2gb_npy PROPERTIES ENVIRONMENT "MOESIM_PYTHON=${MOESIM_PYTHON}")

# ---- trace workload ----
file(WRITE "${FMT_OUT}/azure.csv"
  "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
  "2023-11-16 18:17:03.5,100,10\r\n"
  "2023-11-16 18:17:04.0,200,20\r\n"
  "2023-11-16 18:17:04.0,300,30\r\n"
  "2023-11-16 18:17:06.25,400,40\r\n")
import_cli_test(workload_azure 0
  "workload azure.csv rows 1..2, time x2: 2 requests over 0 s (0 req/s); lengths kept from the trace: prompt mean 1.5, output mean 1.0 (workload rows: prompt mean 250.0, output mean 25.0)"
  "trace|workload|${FMT_OUT}/jsonl_small.h5|--azure|${FMT_OUT}/azure.csv|--start|1|--time-scale|2|-o|${FMT_OUT}/wl_azure.h5")
import_cli_test(workload_azure_start2 0
  "workload azure.csv rows 2..3, time x0.5: 2 requests over 1.125 s"
  "trace|workload|${FMT_OUT}/jsonl_small.h5|--azure|${FMT_OUT}/azure.csv|--start|2|--time-scale|0.5|-o|${FMT_OUT}/wl_azure2.h5")
import_cli_test(workload_poisson 0 "workload Poisson 2 req/s, seed 5: 2 requests over"
  "trace|workload|${FMT_OUT}/jsonl_small.h5|--poisson|2|--seed|5|-o|${FMT_OUT}/wl_poisson.h5")
set_tests_properties(cli.import.workload_azure cli.import.workload_azure_start2 cli.import.workload_poisson
  PROPERTIES FIXTURES_REQUIRED fmt_jsonl)
set_tests_properties(cli.import.workload_azure_start2 PROPERTIES FIXTURES_SETUP fmt_wl)
add_test(NAME cli.import.workload_validate COMMAND moesim trace validate "${FMT_OUT}/wl_azure2.h5")
set_tests_properties(cli.import.workload_validate PROPERTIES FIXTURES_REQUIRED fmt_wl
  PASS_REGULAR_EXPRESSION "ok \\(2 requests")
set(_wl_cases
  "header|TIMESTAMP,Context,Generated\n|wl_header.csv:1: header 'TIMESTAMP,Context,Generated', expected"
  "columns|TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,100\n|wl_columns.csv:2: expected 3 columns"
  "time|TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,1,1\n2023-13-16 18:17:03.5,1,1\n|wl_time.csv:3: column TIMESTAMP: '2023-13-16 18:17:03.5' is not YYYY-MM-DD"
  "order|TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,1,1\n2023-11-16 18:17:03.4,1,1\n|wl_order.csv:3: column TIMESTAMP: '2023-11-16 18:17:03.4' is earlier than the row before"
  "negative|TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,-4,1\n|wl_negative.csv:2: column ContextTokens: '-4' is not a non-negative integer"
  "short|TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,1,1\n|wl_short.csv: 1 data rows from --start 0, the trace needs 2"
  "empty||wl_empty.csv: empty file")
foreach(c ${_wl_cases})
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 body)
  list(GET parts 2 msg)
  file(WRITE "${FMT_OUT}/wl_${name}.csv" "${body}")
  add_test(NAME cli.import.workload_bad_${name} COMMAND sh ${FMT_FAIL} 1 "${msg}"
    $<TARGET_FILE:moesim> trace workload ${FMT_OUT}/jsonl_small.h5 --azure ${FMT_OUT}/wl_${name}.csv -o ${FMT_OUT}/wl_${name}.h5)
  set_tests_properties(cli.import.workload_bad_${name} PROPERTIES FIXTURES_REQUIRED fmt_jsonl)
endforeach()
import_cli_test(workload_both 2 "give exactly one of --azure CSV and --poisson RATE"
  "trace|workload|${FMT_OUT}/jsonl_small.h5|--azure|code|--poisson|1|-o|${FMT_OUT}/x_l182.h5")

# ---- robust readers (issue 5 part 6): route-csv error paths at the CLI ----
# The same one-line error contract as the other formats: empty file,
# non-numeric weight, expert id >= J, and garbage (sparse 2 GiB of NUL bytes,
# and a few MiB of text without a newline: the 1 MiB line cap, not getline,
# ends the read; TIMEOUT 10 s).
set(_rc_head "# route_trace v1\n# model=/m/Tiny.gguf arch=tinymoe n_layer=1 n_expert=8 n_expert_used=2\n# layer=0 expert_bytes=1000 dense_bytes=500\nturn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n")
set(_rc_cases
  "empty||rc_empty.csv: empty file \\(expected"
  "nonnum|${_rc_head}0,0,0,0,0,3,x,0,1000\n0,0,0,0,1,5,0.4,0,0\n|rc_nonnum.csv:5: field weight: 'x' is not"
  "expert|${_rc_head}0,0,0,0,0,8,0.6,0,1000\n0,0,0,0,1,5,0.4,0,0\n|rc_expert.csv:5: field expert: value 8 out of range \\[0, 7\\]")
foreach(c ${_rc_cases})
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 body)
  list(GET parts 2 msg)
  file(WRITE "${FMT_OUT}/rc_${name}.csv" "${body}")
  add_test(NAME cli.import.routecsv_${name} COMMAND sh ${FMT_FAIL} 1 "${msg}"
    $<TARGET_FILE:moesim> trace import --format route-csv ${FMT_OUT}/rc_${name}.csv ${FMT_OUT}/rc_${name}.h5)
endforeach()
add_test(NAME cli.import.garbage_2gb_route-csv COMMAND sh -c
  "truncate -s 2G ${FMT_OUT}/garbage_rc.csv && sh ${FMT_FAIL} 1 'garbage_rc.csv:1: NUL byte at column 1' $<TARGET_FILE:moesim> trace import --format route-csv ${FMT_OUT}/garbage_rc.csv ${FMT_OUT}/g_rc.h5; rc=$?; rm -f ${FMT_OUT}/garbage_rc.csv; exit $rc")
set_tests_properties(cli.import.garbage_2gb_route-csv PROPERTIES TIMEOUT 10 RESOURCE_LOCK fmt_garbage)
# 3 MiB of 'a' without a newline, for every text reader: the error names
# line 1 and the cap, after reading 1 MiB (not the whole file into memory).
foreach(fmt route-csv jsonl dense-csv workload)
  set(g "${FMT_OUT}/longline_${fmt}")
  if(fmt STREQUAL "dense-csv")
    set(gfile "${g}/layer0.csv")
    set(cmd "$<TARGET_FILE:moesim> trace import --format dense-csv --topk 2 --expert-bytes 1 ${g} ${FMT_OUT}/ll.h5")
    set(where "layer0.csv")
  elseif(fmt STREQUAL "workload")
    set(gfile "${g}.csv")
    set(cmd "$<TARGET_FILE:moesim> trace workload ${FMT_OUT}/jsonl_small.h5 --azure ${gfile} -o ${FMT_OUT}/ll.h5")
    set(where "longline_workload.csv")
  elseif(fmt STREQUAL "route-csv")
    set(gfile "${g}.txt")
    set(cmd "$<TARGET_FILE:moesim> trace import --format route-csv ${gfile} ${FMT_OUT}/ll.h5")
    set(where "longline_${fmt}.txt")
  else()
    set(gfile "${g}.txt")
    set(cmd "$<TARGET_FILE:moesim> trace import --format ${fmt} --experts 4 --expert-bytes 1 ${gfile} ${FMT_OUT}/ll.h5")
    set(where "longline_${fmt}.txt")
  endif()
  add_test(NAME cli.import.long_line_${fmt} COMMAND sh -c
    "mkdir -p ${g} && head -c 3145728 /dev/zero | tr -c a a > ${gfile} && sh ${FMT_FAIL} 1 '${where}:1: line longer than 1048576 bytes' ${cmd}; rc=$?; rm -rf ${g} ${gfile}; exit $rc")
  set_tests_properties(cli.import.long_line_${fmt} PROPERTIES TIMEOUT 10 RESOURCE_LOCK fmt_garbage)
endforeach()
set_tests_properties(cli.import.long_line_workload PROPERTIES FIXTURES_REQUIRED fmt_jsonl)
# a request too large to hold (found by hand while writing fuzz_jsonl, same
# class in route-csv): a corrupt token index / step must not allocate
# terabytes (it aborted "out of memory"); one line instead
file(WRITE "${FMT_OUT}/huge_request.jsonl"
  "{\"request_id\": 0, \"token_idx\": 1048575, \"layer\": 4000, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5], \"is_prompt\": true}\n")
add_test(NAME cli.import.jsonl_huge_request COMMAND sh ${FMT_FAIL} 1
  "huge_request.jsonl:1: request 0: 1048576 token rows x 4001 layers x K 2 = 8390705152 cells, more than 16777216"
  $<TARGET_FILE:moesim> trace import --format jsonl --experts 4 --expert-bytes 1 ${FMT_OUT}/huge_request.jsonl ${FMT_OUT}/huge_request.h5)
# route-csv: the header's n_layer=4096 x n_expert_used=1024 makes each step
# 4 Mi cells, so 17 one-line prefill steps pass the cap (2^24 cells)
set(_big "# route_trace v1\n# model=/m/Big.gguf arch=big n_layer=4096 n_expert=1024 n_expert_used=1024\n")
foreach(l RANGE 4095)
  string(APPEND _big "# layer=${l} expert_bytes=1 dense_bytes=0\n")
endforeach()
string(APPEND _big "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n")
foreach(st RANGE 16)
  string(APPEND _big "0,0,${st},0,0,3,1,0,1\n")
endforeach()
file(WRITE "${FMT_OUT}/rc_huge_request.csv" "${_big}")
add_test(NAME cli.import.routecsv_huge_request COMMAND sh ${FMT_FAIL} 1
  "rc_huge_request.csv:4116: request 0: 17 token rows x 4096 layers x K 1024 = 71303168 cells, more than 16777216"
  $<TARGET_FILE:moesim> trace import --format route-csv ${FMT_OUT}/rc_huge_request.csv ${FMT_OUT}/rc_huge_request.h5)
