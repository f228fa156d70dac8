# The Python package (python/, docs/python.md): pytest over python/tests with
# the build tree's module (PYTHONPATH=<build>/python) and the moesim CLI of
# the same build, in the interpreter MOESIM_PYTEST_PYTHON (default: .venv/,
# which `.ci/deps-debian --tests` fills with pandas and pytest).  Only in a
# build configured with -DMOESIM_PYTHON_MODULE=ON (the README's test command);
# there a missing pytest or pandas stops the configure instead of leaving
# the tests out.
if(NOT MOESIM_PYTHON_MODULE)
  return()
endif()
set(MOESIM_PYTEST_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python3" CACHE FILEPATH
    "the Python that runs python/tests (numpy, pandas, pytest)")
execute_process(COMMAND ${MOESIM_PYTEST_PYTHON} -c "import numpy, pandas, pytest" RESULT_VARIABLE _pytest_rc
                OUTPUT_QUIET ERROR_QUIET)
if(NOT _pytest_rc EQUAL 0)
  message(FATAL_ERROR "MOESIM_PYTHON_MODULE=ON: ${MOESIM_PYTEST_PYTHON} cannot import numpy, pandas and pytest "
                      "(run .ci/deps-debian --tests, or set -DMOESIM_PYTEST_PYTHON=...)")
endif()
# Under the sanitizers the interpreter is not instrumented: their runtimes
# are preloaded, and leaks not reported (the interpreter keeps its objects
# at exit by design).
set(_py_asan)
if(MOESIM_SANITIZE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so OUTPUT_VARIABLE _libasan
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libubsan.so OUTPUT_VARIABLE _libubsan
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(_py_asan "LD_PRELOAD=${_libasan} ${_libubsan}" "ASAN_OPTIONS=detect_leaks=0"
               "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endif()
set(_py_env ${_py_asan} "PYTHONPATH=${CMAKE_BINARY_DIR}/python" "PYTHONDONTWRITEBYTECODE=1" "MOESIM_BIN=$<TARGET_FILE:moesim>"
            "MOESIM_SHARED_DIR=${MOESIM_SHARED_DIR}" "MOESIM_TEST_PLUGINS=${CMAKE_CURRENT_BINARY_DIR}")
add_test(NAME python.pytest
         COMMAND ${MOESIM_PYTEST_PYTHON} -m pytest -q -p no:cacheprovider --basetemp=${CMAKE_CURRENT_BINARY_DIR}/pytest
                 ${PROJECT_SOURCE_DIR}/python/tests)
set_tests_properties(python.pytest PROPERTIES ENVIRONMENT "${_py_env}" WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

# `pip install .` as a user runs it (python/tests/pip_install.sh): the wheel
# (not under the sanitizers: the wheel is a normal build)
# built from the checkout, installed into a fresh venv, imported from
# outside the checkout.  It builds the libraries once more (a few minutes).
if(MOESIM_SANITIZE)
  return()
endif()
execute_process(COMMAND ${MOESIM_PYTEST_PYTHON} -c "import scikit_build_core" RESULT_VARIABLE _skb_rc
                OUTPUT_QUIET ERROR_QUIET)
if(NOT _skb_rc EQUAL 0)
  message(FATAL_ERROR "MOESIM_PYTHON_MODULE=ON: ${MOESIM_PYTEST_PYTHON} cannot import scikit_build_core "
                      "(run .ci/deps-debian --tests)")
endif()
add_test(NAME python.pip_install
         COMMAND sh ${PROJECT_SOURCE_DIR}/python/tests/pip_install.sh ${PROJECT_SOURCE_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/pip_install ${MOESIM_PYTEST_PYTHON} $<TARGET_FILE:moesim>)
set_tests_properties(python.pip_install PROPERTIES TIMEOUT 1500)
