# CUDA backend tests (kernels/*.cu): built only when CUDA is (MOESIM_HAVE_CUDA);
# without a CUDA device they exit 77, which ctest reports as skipped.
if(MOESIM_HAVE_CUDA)
  file(GLOB CUDA_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/unit/cuda/test_*.c)
  foreach(src ${CUDA_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
    target_link_libraries(${name} PRIVATE moesim_core moesim_cuda)
    add_test(NAME cuda.${name} COMMAND ${name})
    set_tests_properties(cuda.${name} PROPERTIES SKIP_RETURN_CODE 77)
    if(MOESIM_SANITIZE)
      # ASan's shadow gap collides with the CUDA driver's mappings
      set_tests_properties(cuda.${name} PROPERTIES ENVIRONMENT "ASAN_OPTIONS=protect_shadow_gap=0")
    endif()
  endforeach()
endif()

# The CUDA module is loaded only for a CUDA backend: the moesim executable
# does not link the CUDA libraries (so `moesim list` maps none of them), and
# `--backend cuda` finds and opens libmoesim_cuda.so (here it then reports
# that there is no device, or needs one).
if(MOESIM_HAVE_CUDA)
  add_test(NAME cuda.not_linked COMMAND sh -c "! ldd $<TARGET_FILE:moesim> | grep -E 'libcuda|libcublas|libmoesim_cuda'")
  add_test(NAME cuda.module_loads COMMAND sh -c "out=$($<TARGET_FILE:moesim> calibrate --backend cuda --out ${CMAKE_CURRENT_BINARY_DIR}/cuda-unused.ini 2>&1); echo \"$out\"; echo \"$out\" | grep -q 'cannot load libmoesim_cuda' && exit 1; echo \"$out\" | grep -Eq 'no CUDA device|calibrate: '")
endif()
