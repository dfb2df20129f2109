# C programs written against the MPI standard only (tests/mpi/*.c). They are compiled by the
# build tree's sempicc (so the wrapper is tested with them) and each runs under sempirun at 1,
# 2, 3 and 4 ranks. run_under_openmpi.sh builds and runs the same sources with Open MPI.
if(NOT TARGET sempi_mpi)
  return()
endif()

file(GLOB sempi_mpi_test_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.c)
# sempi-specific programs (not for other MPIs): each X.c runs under the policy X.json.
file(GLOB sempi_mpi_policy_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/sempi/*.c)
set(sempi_mpi_test_dir ${CMAKE_BINARY_DIR}/tests/mpi)

add_test(NAME mpi.compile
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/build_mpi_tests.sh ${CMAKE_BINARY_DIR}/bin/sempicc
          ${sempi_mpi_test_dir} ${sempi_mpi_test_sources} ${sempi_mpi_policy_sources})
set_tests_properties(mpi.compile PROPERTIES FIXTURES_SETUP sempi_mpi_programs TIMEOUT 300)

foreach(source ${sempi_mpi_test_sources})
  get_filename_component(name ${source} NAME_WE)
  foreach(n 1 2 3 4)
    add_test(NAME mpi.${name}.np${n}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_mpi_test.sh $<TARGET_FILE:sempirun>
              ${sempi_mpi_test_dir}/${name} ${n})
    set_tests_properties(mpi.${name}.np${n} PROPERTIES
      FIXTURES_REQUIRED sempi_mpi_programs TIMEOUT 90)
  endforeach()
endforeach()
# mpirun's MPMD form: three programs (one binary, told which it is) in one job, MPI_APPNUM.
add_test(NAME mpi.appnum.mpmd
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_mpmd_test.sh $<TARGET_FILE:sempirun>
          ${sempi_mpi_test_dir}/appnum)
set_tests_properties(mpi.appnum.mpmd PROPERTIES FIXTURES_REQUIRED sempi_mpi_programs TIMEOUT 90)
# Long bcast and reduce in a job whose ranks outnumber its CPUs: binomial trees (one CPU).
add_test(NAME mpi.long_collectives.oversubscribed
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_tree_choice_test.sh $<TARGET_FILE:sempirun>
          ${sempi_mpi_test_dir}/long_collectives ${CMAKE_CURRENT_LIST_DIR}/message_audit.json)
set_tests_properties(mpi.long_collectives.oversubscribed PROPERTIES
  FIXTURES_REQUIRED sempi_mpi_programs TIMEOUT 300)

foreach(source ${sempi_mpi_policy_sources})
  get_filename_component(name ${source} NAME_WE)
  get_filename_component(dir ${source} DIRECTORY)
  foreach(n 1 3)
    add_test(NAME mpi.sempi.${name}.np${n}
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_mpi_test.sh $<TARGET_FILE:sempirun>
              ${sempi_mpi_test_dir}/${name} ${n} ${dir}/${name}.json)
    set_tests_properties(mpi.sempi.${name}.np${n} PROPERTIES
      FIXTURES_REQUIRED sempi_mpi_programs TIMEOUT 90)
  endforeach()
endforeach()

# Once is enough for these two: not again in sanitizer builds (whose instrumented libraries
# need instrumented programs).
if(NOT SEMPI_SANITIZE)
  # The installed tree: sempicc, pkg-config and find_package(sempi) give working programs.
  add_test(NAME mpi.install
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${CMAKE_BINARY_DIR}
            ${CMAKE_BINARY_DIR}/tests/mpi-install $<TARGET_FILE:sempirun>)
  set_tests_properties(mpi.install PROPERTIES TIMEOUT 300)

  # The same sources under Open MPI, when it is installed (skipped otherwise).
  add_test(NAME mpi.openmpi_crosscheck
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_under_openmpi.sh)
  set_tests_properties(mpi.openmpi_crosscheck PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
