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
  $<TARGET_FILE:moesim> trace import --format dense-csv --token-pos per-step x ${JLM_OUT}/x_l71.h5)
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

# Issue 32: three dump shapes imported as they are (hand-written, L = 2, K = 2, J = 4).
# Per-step positions without a phase field, --prompt-len counting steps: request 0 =
# prefill step of 3 tokens + 2 decode steps, request 1 = 2 tokens + 1 step (counted
# as rows, --prompt-len 1 gave 2 prefill rows + 6 decode iterations)
jlm_ok(per_step_plen
  "2 requests, 2 prefill iterations (5 token rows) + 3 decode iterations, 16 JSON lines; no missing cells\n  token positions restart per step: 5 steps in file order; prompt = the first 1 step of each request (--prompt-len counts steps with --token-pos per-step)"
  "${JLM}|--token-pos|per-step|--prompt-len|1|${JLM_DATA}/per_step_noprompt.jsonl")
jlm_fail(per_step_plen_steps 1
  "per_step_noprompt.jsonl:7: request 1 has 2 steps, fewer than --prompt-len 3 \\(with --token-pos per-step, --prompt-len counts the steps that form the prompt"
  --token-pos per-step --prompt-len 3 ${JLM_DATA}/per_step_noprompt.jsonl)
# decode-only, absolute positions, no phase or prompt-length field (issue 17's shape):
# --phase decode; request 3 (tokens 4, 5) prompt 4 rows, request 8 (token 2) 2 rows,
# all 6 x 2 x 2 = 24 prompt cells missing
jlm_ok(decode_nophase
  "2 requests, 2 prefill iterations (6 token rows) + 3 decode iterations, 6 JSON lines; 24 missing cells (100.0 % of prefill cells)"
  "${JLM}|--phase|decode|${JLM_DATA}/decode_nophase.jsonl")
import_cli_test(jsonl_decode_nophase_notes 0
  "every line a generated token (--phase decode); 2 requests start with decode (prompt rows not in the dump: missing cells), 2 from the first decode position"
  "${JLM}|--phase|decode|${JLM_DATA}/decode_nophase.jsonl|${JLM_OUT}/notes3.h5")
# per-request positions: the prompt length unknown, 1 placeholder row each
jlm_ok(decode_nophase_per_request
  "2 requests, 2 prefill iterations (2 token rows) + 9 decode iterations, 6 JSON lines; 32 missing cells"
  "${JLM}|--phase|decode|--token-pos|per-request|${JLM_DATA}/decode_nophase.jsonl")
jlm_fail(phase_missing 1
  "decode_nophase.jsonl:1: field is_prompt: missing \\(a dump without a phase field: --prompt-len P when tokens < P are the prompt, --phase decode when every line is a generated token\\)"
  ${JLM_DATA}/decode_nophase.jsonl)
jlm_fail(prompt_len_zero 2 "--prompt-len 0: a prompt has at least one token \\(a jsonl dump with no prompt lines: --phase decode\\)"
  --prompt-len 0 ${JLM_DATA}/decode_nophase.jsonl)
jlm_fail(phase_and_plen 1 "--phase decode and --prompt-len 2 contradict each other"
  --phase decode --prompt-len 2 ${JLM_DATA}/decode_nophase.jsonl)
jlm_fail(phase_value 2 "--phase: 'prefill' is not decode" --phase prefill ${JLM_DATA}/decode_nophase.jsonl)
# expert ids without weights: --probs-kind topk_ids (1/K placeholders, said in `source`)
jlm_ok(ids_only
  "1 request, 1 prefill iteration (2 token rows) + 1 decode iterations, 6 JSON lines; no missing cells\n  expert ids only: no gate weights read, stored as the 1/K placeholder (probs_kind topk_ids)"
  "${JLM}|--probs-kind|topk_ids|${JLM_DATA}/ids_only.jsonl")
add_test(NAME cli.import.info_jsonl_ids_only COMMAND moesim trace info "${JLM_OUT}/ids_only.h5")
set_tests_properties(cli.import.info_jsonl_ids_only PROPERTIES FIXTURES_REQUIRED jlm_ids_only
  PASS_REGULAR_EXPRESSION "source: +ids_only.jsonl \\(jsonl routing log: expert ids only, weights 1/K placeholders\\).*probs kind: +topk_ids")
jlm_fail(weights_missing 1
  "ids_only.jsonl:1: field topk_weights: missing \\(a dump of expert ids without weights: --probs-kind topk_ids\\)"
  ${JLM_DATA}/ids_only.jsonl)
add_test(NAME cli.import.dense_no_topk_ids COMMAND sh ${JLM_FAIL} 1
  "--format dense-csv: --probs-kind topk_ids is not possible \\(the files hold probabilities"
  $<TARGET_FILE:moesim> trace import --format dense-csv --probs-kind topk_ids --topk 2
  ${CMAKE_CURRENT_SOURCE_DIR}/data/densecsv/small ${JLM_OUT}/dense_ids.h5)
# policies that read router weights refuse the ids-only trace; lru runs on it
foreach(pol "prefetch|fmoe" "prefetch|hybrimoe" "cache|mrs")
  string(REPLACE "|" ";" pv "${pol}")
  list(GET pv 0 kind)
  list(GET pv 1 name)
  add_test(NAME cli.import.ids_only_refuses_${name} COMMAND sh ${JLM_FAIL} 1
    "${kind} policy '${name}' reads router weights, but .*ids_only.h5 holds expert ids only \\(probs_kind topk_ids"
    $<TARGET_FILE:moesim> run --trace ${JLM_OUT}/ids_only.h5 --cache-experts 4 --${kind} ${name} --train 0 --offline)
  set_tests_properties(cli.import.ids_only_refuses_${name} PROPERTIES FIXTURES_REQUIRED jlm_ids_only)
endforeach()
add_test(NAME cli.import.ids_only_runs_lru COMMAND moesim run --trace ${JLM_OUT}/ids_only.h5 --cache-experts 4 --offline --json)
set_tests_properties(cli.import.ids_only_runs_lru PROPERTIES FIXTURES_REQUIRED jlm_ids_only
  PASS_REGULAR_EXPRESSION "\"misses\":[ \t]*8,")
