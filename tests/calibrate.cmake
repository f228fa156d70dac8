# CLI tests of `moesim calibrate` on the host backend (small: 4 MiB copies, 1/16 experts, tokens 1..32).
# Tokens up to 32 (not 8): with the streaming FFN the first ~4 token counts are memory-bound (flat), and
# under load a run that stopped at 8 tokens could leave no clearly rising segment to fit.
set(FAIL ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_fail.sh)
set(CAL ${CMAKE_CURRENT_BINARY_DIR}/cal-host.ini)
set(CALCSV ${CMAKE_CURRENT_BINARY_DIR}/cal-host.csv)

add_test(NAME calibrate.host COMMAND moesim calibrate --backend host --expert-scale 0.0625 --max-tokens 32
         --max-bytes 4M --reps 5 --out ${CAL} --csv ${CALCSV})
set_tests_properties(calibrate.host PROPERTIES FIXTURES_SETUP cal_profile
  PASS_REGULAR_EXPRESSION "H2D pinned +latency .*expert FFN +launch .*overlap \\(32 tokens\\).*wrote .*cal-host.ini \\(platform 'cal-host'")
add_test(NAME calibrate.gen_trace COMMAND moesim trace gen --model mixtral-8x7b -o ${CMAKE_CURRENT_BINARY_DIR}/cal_mix.h5 --seed 5 --requests 2)
set_tests_properties(calibrate.gen_trace PROPERTIES FIXTURES_SETUP cal_trace)

# the written profile drives `moesim run`
add_test(NAME calibrate.run_accepts COMMAND moesim run --trace ${CMAKE_CURRENT_BINARY_DIR}/cal_mix.h5
         --platform ${CAL} --cache-experts 8)
set_tests_properties(calibrate.run_accepts PROPERTIES FIXTURES_REQUIRED "cal_profile;cal_trace"
  PASS_REGULAR_EXPRESSION "decode.*total.*TPOT")
# 6 copy sizes x 4 series + 10 token counts (1 2 3 4 6 8 12 16 24 32) x 3 series, plus the header; measured source lines;
# # comments; the [gpu] roofline is the joint expert + dense fit
add_test(NAME calibrate.outputs COMMAND sh -c "[ $(wc -l < ${CALCSV}) -eq 56 ] && head -1 ${CALCSV} | grep -q '^# moesim ' && grep -Eq '^hbm_bw = (measured|derived) joint expert FFN [+] dense roofline fit' ${CAL} && grep -q '^#   \\[gpu\\] joint   launch' ${CAL} && grep -q '^h2d_bw = measured fit of 6 pinned H2D sizes' ${CAL} && grep -q '^gpu_mem_bytes = estimate host MemTotal' ${CAL} && grep -q '^# Measured points:' ${CAL} && grep -q '^#   expert FFN    launch' ${CAL}")
set_tests_properties(calibrate.outputs PROPERTIES FIXTURES_REQUIRED cal_profile)

function(cal_fail name code regex)
  add_test(NAME calibrate.${name} COMMAND ${FAIL} ${code} "${regex}" $<TARGET_FILE:moesim> calibrate ${ARGN})
endfunction()
cal_fail(bad_backend 1 "^moesim: unknown backend 'tpu' \\(known: host, cuda\\)$" --backend tpu)
cal_fail(no_backend 2 "--backend host\\|cuda is required" --out x.ini)
cal_fail(bad_scale_zero 2 "--expert-scale 0: expected a number in \\(0, 1\\]" --backend host --expert-scale 0)
cal_fail(bad_scale_big 2 "--expert-scale 1.5: expected a number in \\(0, 1\\]" --backend host --expert-scale 1.5)
cal_fail(bad_scale_text 2 "--expert-scale half" --backend host --expert-scale half)
cal_fail(bad_reps 2 "--reps 0: expected a whole number in \\[1, 64\\]" --backend host --reps 0)
cal_fail(bad_max_bytes 2 "--max-bytes 4Q: expected a byte size" --backend host --max-bytes 4Q)
cal_fail(small_max_bytes 2 "--max-bytes 1K: expected a byte size in \\[16KiB" --backend host --max-bytes 1K)
cal_fail(bad_max_tokens 2 "--max-tokens 1: expected a whole number in \\[2, 65536\\]" --backend host --max-tokens 1)
cal_fail(bad_option 2 "unknown option '--max-byte'" --backend host --max-byte 4M)
cal_fail(bad_out 1 "calibrate: --out /no/such/dir/x.ini: folder /no/such/dir: No such file or directory" --backend host --out /no/such/dir/x.ini)
cal_fail(bad_csv 1 "calibrate: --csv /no/such/dir/x.csv: folder /no/such/dir: No such file or directory" --backend host --out ${CMAKE_CURRENT_BINARY_DIR}/unused.ini --csv /no/such/dir/x.csv)
cal_fail(bad_model 1 "unknown model 'mixtral' \\(known:" --backend host --model mixtral)
cal_fail(bad_name 2 "--name a/b: use letters" --backend host --name a/b)
if(NOT MOESIM_HAVE_CUDA)
  cal_fail(no_cuda 1 "^moesim: moesim was not built with CUDA \\(nvcc was not found when it was configured\\)$" --backend cuda)
endif()
