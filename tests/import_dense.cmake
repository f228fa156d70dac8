# dense-csv importer, issue 17 part 2: any first layer (--layer-base or
# renumbered), non-expert columns (--id-columns or by name), sequences from a
# column or --tokens-per-seq with --prompt-len, --probs topk_raw.  Fixtures in
# tests/data/densecsv; cell values in tests/unit/test_import_dense_modes.c.
set(DCM_DATA "${CMAKE_CURRENT_SOURCE_DIR}/data/densecsv")
set(DCM_OUT "${CMAKE_CURRENT_BINARY_DIR}/import_dense")
set(DCM_FAIL "${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh")
file(MAKE_DIRECTORY "${DCM_OUT}")
set(DCM "trace|import|--format|dense-csv|--topk|2|--expert-bytes|1000")

function(dcm_ok name expect args)
  import_cli_test(densecsv_${name} 0 "${expect}" "${args}|${DCM_OUT}/${name}.h5")
  set_tests_properties(cli.import.densecsv_${name} PROPERTIES FIXTURES_SETUP dcm_${name})
  add_test(NAME cli.import.validate_densecsv_${name} COMMAND moesim trace validate "${DCM_OUT}/${name}.h5")
  set_tests_properties(cli.import.validate_densecsv_${name} PROPERTIES FIXTURES_REQUIRED dcm_${name}
    PASS_REGULAR_EXPRESSION ": ok \\(")
endfunction()

# files layer2.csv, layer3.csv with layer_id,token_id columns; 4 rows = 2
# sequences of 2 rows, each 1 prompt row + 1 decode step
dcm_ok(from_layer2
  "imported from_layer2: 2 requests, 2 prefill iterations (2 token rows) + 2 decode iterations, 4 CSV rows per layer; no missing cells\n  layers renumbered from the file names: layer2.csv..layer3.csv -> layers 0..1; columns ignored (not experts): layer_id, token_id; 4 rows -> 2 sequences of 2 rows (--tokens-per-seq); the first 1 rows of a sequence are its prompt, each later row one decode step"
  "${DCM}|--tokens-per-seq|2|--prompt-len|1|${DCM_DATA}/from_layer2")
dcm_ok(layer_base
  "1 request, 1 prefill iteration (4 token rows) + 0 decode iterations, 4 CSV rows per layer; no missing cells\n  files below --layer-base 3 ignored: layer2.csv..layer2.csv; layers renumbered from the file names: layer3.csv..layer3.csv -> layers 0..0"
  "${DCM}|--layer-base|3|${DCM_DATA}/from_layer2")
# raw softmax kept at the top-2 (empty cells elsewhere); row 3 keeps one value: 1 missing cell
dcm_ok(topk_raw
  "2 requests, 2 prefill iterations (3 token rows) + 0 decode iterations, 3 CSV rows per layer; 1 missing cells (16.7 % of prefill cells), first: request 1 step 0 layer 0 slot 1"
  "${DCM}|--probs|topk_raw|${DCM_DATA}/topk_raw")
dcm_ok(named_cols
  "2 requests, 2 prefill iterations (2 token rows) + 1 decode iterations, 3 CSV rows per layer; no missing cells\n  columns ignored (not experts): tok; sequences from column seqno of layer0.csv; the first 1 rows of a sequence are its prompt, each later row one decode step; 1 sequences have no more rows than --prompt-len: prefill only"
  "${DCM}|--seq-column|seqno|--id-columns|tok|--prompt-len|1|${DCM_DATA}/named_cols")

function(dcm_fail name rc msg)
  add_test(NAME cli.import.densecsv_bad_${name} COMMAND sh ${DCM_FAIL} ${rc} "${msg}"
    $<TARGET_FILE:moesim> trace import --format dense-csv --topk 2 --expert-bytes 1 ${ARGN} ${DCM_OUT}/bad_${name}.h5)
endfunction()
dcm_fail(layer_base_past 1 "from_layer2: --layer-base 5: no file layer5.csv \\(files layer2.csv..layer3.csv\\)"
  --layer-base 5 ${DCM_DATA}/from_layer2)
dcm_fail(id_column 1 "from_layer2/layer2.csv:1: --id-columns: no column 'nope' \\(header 'layer_id,token_id,e0,e1,e2,e3'\\)"
  --id-columns token_id,nope ${DCM_DATA}/from_layer2)
dcm_fail(seq_column 1 "from_layer2/layer2.csv:1: --seq-column zz: no such column"
  --seq-column zz ${DCM_DATA}/from_layer2)
dcm_fail(tokens_per_seq 1 "layer2.csv: 4 data rows are not a multiple of --tokens-per-seq 3 \\(the last sequence has 1\\)"
  --tokens-per-seq 3 ${DCM_DATA}/from_layer2)
dcm_fail(tokens_and_request 1 "layer0.csv:1: --tokens-per-seq 2 but the files have a request column"
  --tokens-per-seq 2 ${DCM_DATA}/topk_raw)
dcm_fail(phase_and_prompt 1 "layer0.csv:1: --prompt-len 1 with a phase column: give one of them"
  --prompt-len 1 ${DCM_DATA}/small)
dcm_fail(raw_as_full 1 "topk_raw/layer0.csv:2: column 2 \\(expert 0\\): '' is not a finite number >= 0"
  ${DCM_DATA}/topk_raw)
dcm_fail(raw_too_many 1 "topk_raw/layer0.csv:2: 2 values > 0, more than K=1 \\(--probs-kind topk_raw keeps only the top-k\\)"
  --probs topk_raw --topk 1 ${DCM_DATA}/topk_raw)
dcm_fail(id_is_seq 1 "named_cols/layer0.csv:1: --id-columns: column 'seqno' is the sequence column"
  --seq-column seqno --id-columns seqno ${DCM_DATA}/named_cols)
dcm_fail(probs_bad 2 "--probs: 'sparse' is not full, topk_renorm, topk_raw or topk_ids" --probs sparse ${DCM_DATA}/topk_raw)
