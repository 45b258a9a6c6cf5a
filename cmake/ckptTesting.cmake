# ckpt_add_test(NAME <name> [SOURCES <files...> | TARGET <existing test executable>] [RANKS <n>]
#               [LABELS <labels...>] [LIBS <targets...>] [ENV <VAR=value...>] [TIMEOUT <s>]
#               [FIXTURES_SETUP <f>] [FIXTURES_REQUIRED <f>])
# One GoogleTest executable (or a reuse of one) and one CTest test. Every test runs under
# ${MPIEXEC_EXECUTABLE} with RANKS ranks (default 1; oversubscribed: CI machines have 2 cores) and
# PROCESSORS set; tests with RANKS > 1 get the `mpi` label. CKPTTEST_TMP names a scratch directory
# in the build tree. (Test-only variables do not start with CKPT_: ckpt warns about unknown CKPT_* names.)
find_package(GTest REQUIRED)
# What the MPI in use needs to run tests as root on an oversubscribed 2-core machine. Open MPI refuses
# both unless told; MPICH (Hydra) needs nothing.
execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE _ckpt_mpiexec_version
                ERROR_VARIABLE _ckpt_mpiexec_version)
if(_ckpt_mpiexec_version MATCHES "Open MPI|OpenRTE")
  set(CKPT_MPIEXEC_OVERSUBSCRIBE --oversubscribe)
  # The environment every plain mpiexec test needs (as root, oversubscribed).
  set(CKPT_MPI_TEST_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
else()
  set(CKPT_MPIEXEC_OVERSUBSCRIBE "")
  set(CKPT_MPI_TEST_ENV "")
endif()
# Sanitizer builds run several times slower: .ci/sanitizers sets CKPT_TEST_TIMEOUT_SCALE (default 1),
# which multiplies every ckpt_add_test TIMEOUT.
set(CKPT_TEST_TIMEOUT_SCALE 1 CACHE STRING "Factor applied to the TIMEOUT of ckpt_add_test tests")
function(ckpt_add_test)
  cmake_parse_arguments(T "" "NAME;RANKS;TIMEOUT;TARGET;FIXTURES_SETUP;FIXTURES_REQUIRED" "SOURCES;LABELS;LIBS;ENV" ${ARGN})
  if(NOT T_RANKS)
    set(T_RANKS 1)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${CKPT_TEST_TIMEOUT_SCALE}")
  set(_exe ${T_TARGET})
  if(NOT _exe)
    set(_exe ${T_NAME})
    add_executable(${_exe} ${T_SOURCES})
    target_link_libraries(${_exe} PRIVATE ckpt ckpt_test_main ${T_LIBS})
  endif()
  set(_tmp ${CMAKE_BINARY_DIR}/test-tmp)
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_RANKS} ${CKPT_MPIEXEC_OVERSUBSCRIBE} ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:${_exe}> ${MPIEXEC_POSTFLAGS})
  set(_labels ${T_LABELS})
  if(T_RANKS GREATER 1)
    list(APPEND _labels mpi)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES
    PROCESSORS ${T_RANKS}
    TIMEOUT ${T_TIMEOUT}
    LABELS "${_labels}"
    ENVIRONMENT "CKPTTEST_TMP=${_tmp}/${T_NAME};${CKPT_MPI_TEST_ENV};${T_ENV}")
  if(T_FIXTURES_SETUP)
    set_tests_properties(${T_NAME} PROPERTIES FIXTURES_SETUP ${T_FIXTURES_SETUP})
  endif()
  if(T_FIXTURES_REQUIRED)
    set_tests_properties(${T_NAME} PROPERTIES FIXTURES_REQUIRED ${T_FIXTURES_REQUIRED})
  endif()
endfunction()

