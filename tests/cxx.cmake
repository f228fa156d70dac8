# ms_introsort (policies/lib/introsort.c) against the C++ compiler's own
# std::sort: built only when a C++ compiler is available (the project is C;
# nothing else needs C++).  Without one, unit.test_introsort still checks the
# reference permutations recorded from g++ 12 (docs/policies.md).
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  add_executable(introsort_vs_std ${CMAKE_CURRENT_SOURCE_DIR}/cxx/introsort_vs_std.cpp)
  target_include_directories(introsort_vs_std PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(introsort_vs_std PRIVATE moesim_policies)
  if(MOESIM_SANITIZE) # the C libraries it links carry ASan/UBSan (CMakeLists.txt: C only)
    target_compile_options(introsort_vs_std PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    target_link_options(introsort_vs_std PRIVATE -fsanitize=address,undefined)
  endif()
  add_test(NAME cxx.introsort_vs_std COMMAND introsort_vs_std)
else()
  message(STATUS "no C++ compiler: cxx.introsort_vs_std is not built")
endif()
