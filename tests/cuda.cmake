# CUDA backend tests (kernels/*.cu): built only when CUDA is (MOESIM_HAVE_CUDA);
# without a CUDA device they exit 77, which ctest reports as skipped.
if(MOESIM_HAVE_CUDA)
  file(GLOB CUDA_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/unit/cuda/test_*.c)
  foreach(src ${CUDA_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_executable(${name} ${src})
    target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
    target_link_libraries(${name} PRIVATE moesim_core)
    add_test(NAME cuda.${name} COMMAND ${name})
    set_tests_properties(cuda.${name} PROPERTIES SKIP_RETURN_CODE 77)
    if(MOESIM_SANITIZE)
      # ASan's shadow gap collides with the CUDA driver's mappings
      set_tests_properties(cuda.${name} PROPERTIES ENVIRONMENT "ASAN_OPTIONS=protect_shadow_gap=0")
    endif()
  endforeach()
endif()
