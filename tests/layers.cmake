# The layers (docs/layout.md): include directions and folder cycles on the
# real sources, the checker itself on small trees that break each rule, and
# no CLI object in any library.
set(LAYERS_SH ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_layers.sh)
add_test(NAME layers.directions COMMAND ${LAYERS_SH} ${PROJECT_SOURCE_DIR})

set(LAYERS_FAKE ${CMAKE_CURRENT_BINARY_DIR}/layers_fake)
# fake tree: mk NAME 'file:include ...' builds LAYERS_FAKE/NAME with empty files
set(_mk "mk() { d=${LAYERS_FAKE}/$1; rm -rf $d; shift; for fi in \"$@\"; do f=\${fi%%:*}; i=\${fi#*:}; mkdir -p $d/$(dirname $f); echo \"#include \\\"$i\\\"\" >> $d/$f; done; echo $d; }")
add_test(NAME layers.detects_upward COMMAND sh -c "${_mk}; d=$(mk up sim/core/err.c:sim/engine/engine.h sim/engine/engine.h:sim/core/err.h); out=$(${LAYERS_SH} $d) && exit 1; echo \"$out\" | grep -q 'sim/core/err.c:1: sim/core (layer 0) includes sim/engine/engine.h (layer 3): includes go down only'")
add_test(NAME layers.detects_cycle COMMAND sh -c "${_mk}; d=$(mk cyc traces/format/trace.c:traces/import/import.h traces/import/import.c:traces/format/trace.h sim/core/err.c:sim/core/err.h); out=$(${LAYERS_SH} $d) && exit 1; echo \"$out\" | grep -q '^folder cycle among:' && echo \"$out\" | grep -q 'traces/format' && echo \"$out\" | grep -q 'traces/import'")
add_test(NAME layers.detects_relative COMMAND sh -c "${_mk}; d=$(mk rel policies/cache/lru.c:../policy.h sim/core/err.c:sim/core/err.h); out=$(${LAYERS_SH} $d) && exit 1; echo \"$out\" | grep -q 'policies/cache/lru.c:1: include \"../policy.h\" is relative'")
add_test(NAME layers.detects_unknown_folder COMMAND sh -c "${_mk}; d=$(mk unk sim/misc/x.c:sim/core/err.h sim/core/err.c:sim/core/err.h); out=$(${LAYERS_SH} $d) && exit 1; echo \"$out\" | grep -q 'folder sim/misc is in no layer'")

# the CLI lives in the executable only: no library holds a sim/cli object
add_test(NAME layers.no_cli_in_libraries
         COMMAND sh -c "for a in $<TARGET_FILE:moesim_base> $<TARGET_FILE:moesim_traces> $<TARGET_FILE:moesim_policies> $<TARGET_FILE:moesim_engine> $<TARGET_FILE:moesim_kernels> $<TARGET_FILE:moesim_apps>; do ar t $a | grep -E '^(cli_|main)' && exit 1; ar t $a | grep -q . || exit 1; done; exit 0")
