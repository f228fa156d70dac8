# Out-of-tree policies (policies/plugin.h): the example under examples/plugin
# built against an installed moesim and run by `run` and `sweep`; and one
# line for each plugin the loader refuses, never a crash.
add_test(NAME plugin.example COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/plugin/example.sh ${PROJECT_SOURCE_DIR}
         ${CMAKE_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/plugin_example)
set_tests_properties(plugin.example PROPERTIES TIMEOUT 600)
# the refused plugins, and the example built in the tree (python/tests loads it too)
foreach(p bad_abi no_symbol lru)
  set(_src ${CMAKE_CURRENT_SOURCE_DIR}/plugin/${p}.c)
  if(p STREQUAL "lru")
    set(_src ${PROJECT_SOURCE_DIR}/examples/plugin/lru_plugin.c)
  endif()
  add_library(test_plugin_${p} MODULE ${_src})
  target_include_directories(test_plugin_${p} PRIVATE ${PROJECT_SOURCE_DIR})
  set_target_properties(test_plugin_${p} PROPERTIES C_VISIBILITY_PRESET hidden)
endforeach()
add_test(NAME plugin.fixture COMMAND moesim trace gen --model mixtral-8x7b -o ${CMAKE_CURRENT_BINARY_DIR}/plugin_mix.h5
         --seed 3 --requests 2)
set_tests_properties(plugin.fixture PROPERTIES FIXTURES_SETUP plugin_trace)
function(plugin_refused name regex)
  add_test(NAME plugin.${name} COMMAND moesim run --trace ${CMAKE_CURRENT_BINARY_DIR}/plugin_mix.h5
           --cache-experts 64 ${ARGN})
  set_tests_properties(plugin.${name} PROPERTIES FIXTURES_REQUIRED plugin_trace WILL_FAIL ON)
  add_test(NAME plugin.${name}.message COMMAND sh -c "\"$0\" run --trace '${CMAKE_CURRENT_BINARY_DIR}/plugin_mix.h5' --cache-experts 64 \"$@\" 2>&1; test $? -eq 1"
           $<TARGET_FILE:moesim> ${ARGN})
  set_tests_properties(plugin.${name}.message PROPERTIES FIXTURES_REQUIRED plugin_trace PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
plugin_refused(bad_abi "^moesim: plugin [^ ]*test_plugin_bad_abi.so: built for policy ABI version [0-9]+, this moesim has version [0-9]+: rebuild"
               --cache plugin:path=$<TARGET_FILE:test_plugin_bad_abi>)
plugin_refused(no_symbol "^moesim: plugin [^ ]*no_symbol.so: no symbol ms_policy_abi"
               --cache plugin:path=$<TARGET_FILE:test_plugin_no_symbol>)
plugin_refused(missing_file "^moesim: plugin nosuch.so: cannot load it: "
               --cache plugin:path=nosuch.so)
plugin_refused(no_path "^moesim: cache policy 'plugin:reset=1': expected plugin:path=FILE.so"
               --cache plugin:reset=1)
