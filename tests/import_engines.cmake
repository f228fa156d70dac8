# Serving engines' outputs, issue 17 part 3: SGLang and vLLM
# --enable-return-routed-experts responses (C importers sglang / vllm) and HF
# output_router_logits (hf-logits, Python converter).  Every fixture in
# tests/data/engine encodes the same routing (1 prompt + 1 decode row, L = 2,
# K = 2, J = 4; cell values in tests/unit/test_import_engines.c); the bad
# inputs are written here.  import_cli_test comes from tests/import.cmake.
set(ENG_DATA "${CMAKE_CURRENT_SOURCE_DIR}/data/engine")
set(ENG_OUT "${CMAKE_CURRENT_BINARY_DIR}/import_engines")
set(ENG_FAIL "${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh")
file(MAKE_DIRECTORY "${ENG_OUT}")
set(SGL "trace|import|--format|sglang|--layers|2|--topk|2|--experts|4|--expert-bytes|1MiB")
set(VLL "trace|import|--format|vllm|--experts|4|--expert-bytes|1MiB")

function(eng_ok name expect args)
  import_cli_test(engine_${name} 0 "${expect}" "${args}|${ENG_OUT}/${name}.h5")
  set_tests_properties(cli.import.engine_${name} PROPERTIES FIXTURES_SETUP eng_${name})
  add_test(NAME cli.import.validate_engine_${name} COMMAND moesim trace validate "${ENG_OUT}/${name}.h5")
  set_tests_properties(cli.import.validate_engine_${name} PROPERTIES FIXTURES_REQUIRED eng_${name}
    PASS_REGULAR_EXPRESSION ": ok \\(1 requests, 2 iterations, 2 rows, 0 missing cells\\)")
endfunction()

set(_one "1 request, 1 prefill iteration (1 token rows) + 1 decode iterations")
set(_ids "expert ids only: the source has no gate weights, stored as the 1/K placeholder (probs_kind topk_ids)")
eng_ok(sglang_generate "${_one}, 1 API records; no missing cells\n  1 response -> request ids 0..0 in order of first appearance; ${_ids}"
  "${SGL}|${ENG_DATA}/sglang_generate.json")
eng_ok(sglang_stream "${_one}, 2 API records; no missing cells\n  1 response -> request ids 0..0 in order of first appearance; ${_ids}; 1 records without routed experts (stream chunks, usage) merged by response id"
  "${SGL}|${ENG_DATA}/sglang_generate_stream.txt")
eng_ok(sglang_chat "${_one}, 1 API records" "${SGL}|${ENG_DATA}/sglang_chat.json")
eng_ok(sglang_chat_stream "${_one}, 3 API records; no missing cells\n  1 response -> request ids 0..0 in order of first appearance; ${_ids}; 2 records without routed experts"
  "${SGL}|${ENG_DATA}/sglang_chat_stream.txt")
eng_ok(vllm_chat "${_one}, 1 API records; no missing cells\n  1 choice -> request ids 0..0" "${VLL}|${ENG_DATA}/vllm_chat.json")
eng_ok(vllm_generate "${_one}" "${VLL}|--prompt-len|1|${ENG_DATA}/vllm_generate.json")
eng_ok(vllm_offline "${_one}" "${VLL}|--prompt-len|1|${ENG_DATA}/vllm_offline.npy")
# a policy that reads weights refuses the ids-only trace; one that does not runs
add_test(NAME cli.import.engine_policy_needs_weights COMMAND sh ${ENG_FAIL} 1
  "prefetch policy 'fmoe' reads router weights, but .*sglang_chat.h5 holds expert ids only \\(probs_kind topk_ids"
  $<TARGET_FILE:moesim> run --trace ${ENG_OUT}/sglang_chat.h5 --prefetch fmoe --cache lru --cache-experts 2 --train 0)
add_test(NAME cli.import.engine_policy_mrs COMMAND sh ${ENG_FAIL} 1 "cache policy 'mrs' reads router weights"
  $<TARGET_FILE:moesim> run --trace ${ENG_OUT}/sglang_chat.h5 --prefetch none --cache mrs --cache-experts 2)
add_test(NAME cli.import.engine_policy_ids_ok COMMAND moesim run --trace ${ENG_OUT}/sglang_chat.h5
  --prefetch eam --cache lru --cache-experts 2 --train 0)
set_tests_properties(cli.import.engine_policy_needs_weights cli.import.engine_policy_mrs cli.import.engine_policy_ids_ok
  PROPERTIES FIXTURES_REQUIRED eng_sglang_chat)
# trace stats: no weighted entropies for ids only
add_test(NAME cli.import.engine_stats_no_weights COMMAND moesim trace stats ${ENG_OUT}/sglang_chat.h5 --json)
set_tests_properties(cli.import.engine_stats_no_weights PROPERTIES FIXTURES_REQUIRED eng_sglang_chat
  PASS_REGULAR_EXPRESSION "\"entropy_weighted_iteration\":[^}]*null")

# bad inputs: one line naming file, line / response and value; exit 1
set(_b64 "AQAAAAMAAAAAAAAAAgAAAAIAAAABAAAAAwAAAAAAAAA=")
set(_meta "\"prompt_tokens\": 1, \"completion_tokens\": 2")
set(_eng_cases
  "truncated|{\"meta_info\": {\"id\": \"r1\", ${_meta}, \"routed_experts\": \"AQAAAAMAAAAAAAAAAgAAAAIAAAABAAAAAwAA\"}}|eng_truncated.jsonl:1: routed_experts: 27 bytes, not a multiple of 4 x 2 layers x K 2 = 16"
  "not_b64|{\"meta_info\": {\"id\": \"r1\", ${_meta}, \"routed_experts\": \"AQAA*AMAAAAAAAAAAgAAAAIAAAABAAAAAwAAAAAAAAA=\"}}|eng_not_b64.jsonl:1: character 5 \\('\\*', byte 42\\) is not base64"
  "rows|{\"meta_info\": {\"id\": \"r1\", \"prompt_tokens\": 1, \"completion_tokens\": 3, \"routed_experts\": \"${_b64}\"}}|eng_rows.jsonl:1: response r1: 2 routed-expert rows, expected prompt 1 \\+ completion 3 - 1 - start 0 = 3"
  "no_payload|{\"meta_info\": {\"id\": \"r7\", ${_meta}}}|eng_no_payload.jsonl: response r7 carries no routed experts"
  "twice|{\"meta_info\": {\"id\": \"r1\", ${_meta}, \"routed_experts\": \"${_b64}\"}}\n{\"meta_info\": {\"id\": \"r1\", ${_meta}, \"routed_experts\": \"${_b64}\"}}|eng_twice.jsonl:2: response r1 carries routed experts twice \\(first at eng_twice.jsonl:1\\)"
  "bad_json|{\"meta_info\": {|eng_bad_json.jsonl:1: bad JSON at column"
  "not_object|[1, 2]|eng_not_object.jsonl:1: expected a JSON object \\(an API response\\)"
  "empty|\n\n|eng_empty.jsonl: empty file \\(no API responses\\)")
foreach(c ${_eng_cases})
  string(REPLACE "|" ";" parts "${c}")
  list(GET parts 0 name)
  list(GET parts 1 body)
  list(GET parts 2 msg)
  file(WRITE "${ENG_OUT}/eng_${name}.jsonl" "${body}\n")
  add_test(NAME cli.import.engine_bad_${name} COMMAND sh ${ENG_FAIL} 1 "${msg}"
    $<TARGET_FILE:moesim> trace import --format sglang --layers 2 --topk 2 --experts 4 --expert-bytes 1
    ${ENG_OUT}/eng_${name}.jsonl ${ENG_OUT}/eng_${name}.h5)
endforeach()
function(eng_fail name rc msg)
  add_test(NAME cli.import.engine_bad_${name} COMMAND sh ${ENG_FAIL} ${rc} "${msg}" $<TARGET_FILE:moesim> ${ARGN})
endfunction()
eng_fail(id_range 1 "sglang_chat.json:1: response c1: row 0 engine layer 0: expert id 3 out of range \\[0, 3\\)"
  trace import --format sglang --layers 2 --topk 2 --experts 3 --expert-bytes 1 ${ENG_DATA}/sglang_chat.json ${ENG_OUT}/x_l75.h5)
eng_fail(start_len 1 "sglang_chat.json:1: response c1: --start-len 1 leaves no prompt rows \\(prompt 1\\)"
  trace import --format sglang --layers 2 --topk 2 --experts 4 --expert-bytes 1 --start-len 1 ${ENG_DATA}/sglang_chat.json ${ENG_OUT}/x_l77.h5)
eng_fail(engine_layers 1 "sglang_chat.json:1: routed_experts: 32 bytes, not a multiple of 4 x 3 layers x K 2 = 24"
  trace import --format sglang --layers 2 --topk 2 --experts 4 --expert-bytes 1 --engine-layers 3 ${ENG_DATA}/sglang_chat.json ${ENG_OUT}/x_l79.h5)
eng_fail(no_shape 1 "--format sglang: the payload has no shape: give --model PROFILE"
  trace import --format sglang --experts 4 --expert-bytes 1 ${ENG_DATA}/sglang_chat.json ${ENG_OUT}/x_l81.h5)
eng_fail(vllm_layers 1 "vllm_chat.json:1: routed_experts: .npy shape \\(2, 2, 2\\), expected 3 layers on axis 1"
  trace import --format vllm --experts 4 --expert-bytes 1 --engine-layers 3 ${ENG_DATA}/vllm_chat.json ${ENG_OUT}/x_l83.h5)
eng_fail(vllm_no_prompt 1 "vllm_generate.json:1: response r1#0: prompt length unknown \\(no usage.prompt_tokens\\): give --prompt-len P"
  trace import --format vllm --experts 4 --expert-bytes 1 ${ENG_DATA}/vllm_generate.json ${ENG_OUT}/x_l85.h5)
eng_fail(vllm_npy_dtype 1 "hf_router_logits.npy: .npy descr '<f4' is not an integer type"
  trace import --format vllm --experts 4 --expert-bytes 1 --prompt-len 1 ${ENG_DATA}/hf_router_logits.npy ${ENG_OUT}/x_l87.h5)
eng_fail(opt_other_format 2 "--engine-layers does not apply to --format jsonl \\(only sglang, vllm\\)"
  trace import --format jsonl --engine-layers 3 x ${ENG_OUT}/x_l89.h5)
# garbage: a sparse 2 GiB file is refused by its size before any read
add_test(NAME cli.import.garbage_2gb_sglang COMMAND sh -c
  "truncate -s 2G ${ENG_OUT}/garbage_sglang && sh ${ENG_FAIL} 1 'garbage_sglang: 2048.0 MiB, more than the 256 MiB' $<TARGET_FILE:moesim> trace import --format sglang --layers 2 --topk 2 --experts 4 --expert-bytes 1 ${ENG_OUT}/garbage_sglang ${ENG_OUT}/g.h5; rc=$?; rm -f ${ENG_OUT}/garbage_sglang; exit $rc")
set_tests_properties(cli.import.garbage_2gb_sglang PROPERTIES TIMEOUT 10 RESOURCE_LOCK fmt_garbage)
add_test(NAME cli.import.engine_bad_nul COMMAND sh -c
  "printf '{\"a\": 1}\\000' > ${ENG_OUT}/nul.json && sh ${ENG_FAIL} 1 'nul.json: NUL byte at offset 8' $<TARGET_FILE:moesim> trace import --format vllm --experts 4 --expert-bytes 1 ${ENG_OUT}/nul.json ${ENG_OUT}/nul.h5")

# ---- hf-logits (NumPy; the .pt test needs PyTorch and is skipped without it) ----
import_cli_test(hf_logits_npy 0
  "imported hf_router_logits.npy: ${_one}, 2 token rows; no missing cells\n  router probabilities = softmax of the logits (float64); top-k = the K largest"
  "trace|import|--format|hf-logits|--experts|4|--topk|2|--expert-bytes|1MiB|--prompt-len|1|${ENG_DATA}/hf_router_logits.npy|${ENG_OUT}/hf_npy.h5")
set_tests_properties(cli.import.hf_logits_npy PROPERTIES FIXTURES_SETUP eng_hf ENVIRONMENT "MOESIM_PYTHON=${MOESIM_PYTHON}")
add_test(NAME cli.import.validate_hf_logits_npy COMMAND moesim trace validate "${ENG_OUT}/hf_npy.h5")
set_tests_properties(cli.import.validate_hf_logits_npy PROPERTIES FIXTURES_REQUIRED eng_hf
  PASS_REGULAR_EXPRESSION ": ok \\(1 requests, 2 iterations, 2 rows, 0 missing cells\\)")
eng_fail(hf_prompt_len 1 "hf_router_logits.npy: --prompt-len 5 but only 2 token rows"
  trace import --format hf-logits --experts 4 --topk 2 --expert-bytes 1 --prompt-len 5 ${ENG_DATA}/hf_router_logits.npy ${ENG_OUT}/x_l106.h5)
eng_fail(hf_not_tensor 1 "sglang_chat.json: neither a .npy, a .npz nor a torch.save file"
  trace import --format hf-logits --experts 4 --topk 2 --expert-bytes 1 ${ENG_DATA}/sglang_chat.json ${ENG_OUT}/x_l108.h5)
eng_fail(hf_layout 2 "--layout: 'LJT' is not LTJ or TLJ"
  trace import --format hf-logits --experts 4 --topk 2 --expert-bytes 1 --layout LJT ${ENG_DATA}/hf_router_logits.npy ${ENG_OUT}/x_l110.h5)
set_tests_properties(cli.import.engine_bad_hf_prompt_len cli.import.engine_bad_hf_not_tensor
  PROPERTIES ENVIRONMENT "MOESIM_PYTHON=${MOESIM_PYTHON}")
add_test(NAME cli.import.hf_logits_torch
  COMMAND ${MOESIM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/interop/hf_logits_pt.py $<TARGET_FILE:moesim> ${ENG_DATA}/hf_router_logits.npy ${ENG_OUT})
set_tests_properties(cli.import.hf_logits_torch PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "MOESIM_PYTHON=${MOESIM_PYTHON}")
# The hf-logits part of unit.test_import_engines runs the Python converter.
set_tests_properties(unit.test_import_engines PROPERTIES ENVIRONMENT "MOESIM_PYTHON=${MOESIM_PYTHON}")
# The converters themselves, when their output directory cannot be written (here a regular file
# in its place, which fails for root too): one line naming the file, exit 1, no traceback.
file(WRITE "${ENG_OUT}/not_a_dir" "")
add_test(NAME cli.import.converter_unwritable_logits COMMAND sh ${ENG_FAIL} 1
  "^moesim: .*/not_a_dir/layer0.csv: cannot write: Not a directory$"
  ${MOESIM_PYTHON} ${PROJECT_SOURCE_DIR}/traces/tools/logits2trace.py ${ENG_DATA}/hf_router_logits.npy ${ENG_OUT}/not_a_dir)
add_test(NAME cli.import.converter_unwritable_npy COMMAND sh ${ENG_FAIL} 1
  "^moesim: .*/not_a_dir/layer0.csv: cannot write: Not a directory$"
  ${MOESIM_PYTHON} ${PROJECT_SOURCE_DIR}/traces/tools/npy2trace.py ${ENG_DATA}/hf_router_logits.npy ${ENG_OUT}/not_a_dir)
