# ckpt_add_test(NAME <name> SOURCES <files...> [RANKS <n>] [LABELS <labels...>] [LIBS <targets...>]
#               [TIMEOUT <s>])
# One GoogleTest executable and one CTest test. RANKS > 0 runs it under ${MPIEXEC_EXECUTABLE} with
# that many ranks (oversubscribed: CI machines have 2 cores) and sets PROCESSORS; every test gets
# its own scratch directory in CKPTTEST_TMP.
find_package(GTest REQUIRED)
function(ckpt_add_test)
  cmake_parse_arguments(T "" "NAME;RANKS;TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT T_RANKS)
    set(T_RANKS 1)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ckpt ckpt_test_main ${T_LIBS})
  set(_tmp ${CMAKE_BINARY_DIR}/test-tmp/${T_NAME})
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_RANKS} --oversubscribe ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:${T_NAME}> ${MPIEXEC_POSTFLAGS})
  set(_labels ${T_LABELS})
  if(T_RANKS GREATER 1)
    list(APPEND _labels mpi)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES
    PROCESSORS ${T_RANKS}
    TIMEOUT ${T_TIMEOUT}
    LABELS "${_labels}"
    ENVIRONMENT "CKPTTEST_TMP=${_tmp};OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endfunction()
