# jsonl importer, issue 17 part 1: decode-only requests, request keys from
# several fields or per input file, token positions per request / per step.
# Fixtures in tests/data/jsonl (hand-written, L = 2, K = 2, J = 4); cell
# values are checked in tests/unit/test_import_jsonl_modes.c.
# import_cli_test comes from tests/import.cmake.
set(JLM_DATA "${CMAKE_CURRENT_SOURCE_DIR}/data/jsonl")
set(JLM_OUT "${CMAKE_CURRENT_BINARY_DIR}/import_jsonl")
set(JLM_FAIL "${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh")
file(MAKE_DIRECTORY "${JLM_OUT}")
set(JLM "trace|import|--format|jsonl|--experts|4|--expert-bytes|1MiB")

function(jlm_ok name expect args)
  import_cli_test(jsonl_${name} 0 "${expect}" "${args}|${JLM_OUT}/${name}.h5")
  set_tests_properties(cli.import.jsonl_${name} PROPERTIES FIXTURES_SETUP jlm_${name})
  add_test(NAME cli.import.validate_jsonl_${name} COMMAND moesim trace validate "${JLM_OUT}/${name}.h5")
  set_tests_properties(cli.import.validate_jsonl_${name} PROPERTIES FIXTURES_REQUIRED jlm_${name}
    PASS_REGULAR_EXPRESSION ": ok \\(")
endfunction()

# decode-only, prompt length from a field: (gsm8k,0) P 3 + 2 decode rows,
# (gsm8k,1) P 2 + 1: 5 prefill rows, all 5 x 2 layers x 2 slots missing
jlm_ok(decode_field
  "2 requests, 2 prefill iterations (5 token rows) + 3 decode iterations, 6 JSON lines; 20 missing cells (100.0 % of prefill cells)"
  "${JLM}|--request-key|dataset,problem_id|--fields|prompt_len=prompt_tokens|--token-pos|per-request|${JLM_DATA}/decode_gsm8k.jsonl")
import_cli_test(jsonl_decode_field_notes 0
  "request keys (dataset,problem_id) -> ids 0..1 in order of first appearance; 2 requests start with decode (prompt rows not in the dump: missing cells), 2 with the prompt length from field prompt_tokens"
  "${JLM}|--request-key|dataset,problem_id|--fields|prompt_len=prompt_tokens|--token-pos|per-request|${JLM_DATA}/decode_gsm8k.jsonl|${JLM_OUT}/notes.h5")
# two files whose keys collide in spirit (both number problems from 0),
# prompt length unknown: 1 placeholder row each, 3 x 1 x 2 x 2 = 12 missing
jlm_ok(two_files
  "imported decode_gsm8k.jsonl + 1 more: 3 requests, 3 prefill iterations (3 token rows) + 4 decode iterations, 8 JSON lines; 12 missing cells (100.0 % of prefill cells)"
  "${JLM}|--request-key|dataset,problem_id|--token-pos|per-request|${JLM_DATA}/decode_gsm8k.jsonl|${JLM_DATA}/decode_math.jsonl")
import_cli_test(jsonl_two_files_notes 0
  "2 input files, requests kept apart per file; request keys (dataset,problem_id, file) -> ids 0..2 in order of first appearance; 3 requests start with decode (prompt rows not in the dump: missing cells), 3 with the prompt length unknown (1 placeholder prompt row)"
  "${JLM}|--request-key|dataset,problem_id|--token-pos|per-request|${JLM_DATA}/decode_gsm8k.jsonl|${JLM_DATA}/decode_math.jsonl|${JLM_OUT}/notes2.h5")
# the same request numbers in two files stay two requests (small.jsonl twice)
import_cli_test(jsonl_same_file_twice 0
  "4 requests, 4 prefill iterations (6 token rows) + 4 decode iterations, 18 JSON lines; 4 missing cells"
  "${JLM}|${CMAKE_CURRENT_SOURCE_DIR}/data/jsonl/small.jsonl|${CMAKE_CURRENT_SOURCE_DIR}/data/jsonl/small.jsonl|${JLM_OUT}/twice.h5")
# positions restarting per step: request 0 = prefill of 2 + 2 decode steps,
# request 1 = prefill of 1 + 1 decode step; 5 steps
jlm_ok(per_step
  "2 requests, 2 prefill iterations (3 token rows) + 3 decode iterations, 12 JSON lines; no missing cells\n  token positions restart per step: 5 steps in file order"
  "${JLM}|--token-pos|per-step|${JLM_DATA}/per_step.jsonl")
# absolute positions, decode from position 5: prompt of 5 rows, all missing,
# + token 6 layer 1: 5 x 2 x 2 + 2 = 22 missing
jlm_ok(decode_absolute
  "1 request, 1 prefill iteration (5 token rows) + 2 decode iterations, 3 JSON lines; 22 missing cells (100.0 % of prefill cells, 25.0 % of decode cells)"
  "${JLM}|${JLM_DATA}/decode_absolute.jsonl")

# bad input: one line naming file, line, field and value; exit 1; no output
function(jlm_fail name rc msg)
  add_test(NAME cli.import.jsonl_bad_${name} COMMAND sh ${JLM_FAIL} ${rc} "${msg}"
    $<TARGET_FILE:moesim> trace import --format jsonl --experts 4 --expert-bytes 1 ${ARGN} ${JLM_OUT}/bad_${name}.h5)
endfunction()
jlm_fail(key_missing 1 "decode_gsm8k.jsonl:1: field nope: missing \\(--request-key dataset,nope\\)"
  --request-key dataset,nope ${JLM_DATA}/decode_gsm8k.jsonl)
jlm_fail(key_empty 1 "--request-key 'dataset,,x': expected 1 to 8 comma-separated field names"
  --request-key dataset,,x ${JLM_DATA}/decode_gsm8k.jsonl)
jlm_fail(token_pos 2 "--token-pos: 'restart' is not absolute, per-request or per-step"
  --token-pos restart ${JLM_DATA}/per_step.jsonl)
jlm_fail(decode_at_zero 1
  "decode_gsm8k.jsonl:1: request \"gsm8k\",0 starts with decode at position 0: its prompt length is unknown"
  --request-key dataset,problem_id ${JLM_DATA}/decode_gsm8k.jsonl)
jlm_fail(plen_field_missing 1 "decode_absolute.jsonl:1: field n_prompt: missing"
  --fields prompt_len=n_prompt ${JLM_DATA}/decode_absolute.jsonl)
jlm_fail(restart_hint 1 "per_step.jsonl:7: field layer: request 0 token 0 layer 0 given twice \\(first on line 1\\) \\(positions restarting per step\\? --token-pos per-step\\)"
  --prompt-len 2 ${JLM_DATA}/per_step.jsonl)
add_test(NAME cli.import.opt_not_for_format COMMAND sh ${JLM_FAIL} 2
  "--token-pos does not apply to --format dense-csv \\(only jsonl\\)"
  $<TARGET_FILE:moesim> trace import --format dense-csv --token-pos per-step x ${JLM_OUT}/x.h5)
file(WRITE "${JLM_OUT}/plen_conflict.jsonl"
  "{\"request_id\": 1, \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5], \"is_prompt\": false, \"P\": 3}\n"
  "{\"request_id\": 1, \"token_idx\": 1, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5], \"is_prompt\": false, \"P\": 4}\n")
jlm_fail(plen_conflict 1 "plen_conflict.jsonl:2: field P: request 1 has prompt length 4 here but 3 on plen_conflict.jsonl:1"
  --fields prompt_len=P --token-pos per-request ${JLM_OUT}/plen_conflict.jsonl)
file(WRITE "${JLM_OUT}/decode_in_prompt.jsonl"
  "{\"request_id\": 1, \"token_idx\": 2, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5], \"is_prompt\": false, \"P\": 3}\n")
jlm_fail(decode_in_prompt 1 "decode_in_prompt.jsonl:1: request 1: decode token 2 inside the prompt \\(prompt length 3\\)"
  --fields prompt_len=P ${JLM_OUT}/decode_in_prompt.jsonl)
file(WRITE "${JLM_OUT}/bad_key_type.jsonl"
  "{\"request_id\": [1], \"token_idx\": 0, \"layer\": 0, \"topk_ids\": [1, 2], \"topk_weights\": [0.5, 0.5], \"is_prompt\": true}\n")
jlm_fail(key_type 1 "bad_key_type.jsonl:1: field request_id: value \\[1\\] is not a non-negative integer or a string"
  ${JLM_OUT}/bad_key_type.jsonl)
