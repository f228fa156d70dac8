# The run configuration's keys (sim/engine/runkeys.h): one name for a CLI flag, a
# sweep key and a golden column; the same point through all three.
add_test(NAME runkeys.same_point COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/runkeys_same_point.sh
         $<TARGET_FILE:moesim> ${CMAKE_CURRENT_BINARY_DIR}/runkeys)
set(RK_FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
add_test(NAME runkeys.flag_rule COMMAND ${RK_FAIL} 2 "unknown option '--cache_experts'" $<TARGET_FILE:moesim> run --trace x.h5 --cache_experts 4)
add_test(NAME runkeys.h2d_gbps COMMAND ${RK_FAIL} 2 "^moesim: run: --h2d-gbps 0: expected a positive number$" $<TARGET_FILE:moesim> run --trace x.h5 --cache-experts 4 --h2d-gbps 0)
