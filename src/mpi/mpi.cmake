# The mpi.h compatibility layer: libsempi_mpi (the MPI C interface over sempi's C++ API), the
# compiler wrappers sempicc / sempicxx and the pkg-config file sempi-mpi.pc.

add_library(sempi_mpi SHARED
  mpi/env.cpp mpi/p2p.cpp mpi/bsend.cpp mpi/comm.cpp mpi/attr.cpp mpi/datatype.cpp mpi/coll.cpp mpi/datatype_engine.cpp)
# Entry points kept in files of their own (one concept per file).
target_sources(sempi_mpi PRIVATE
  mpi/matched_probe.cpp mpi/errhandler.cpp mpi/request_status.cpp mpi/cart_sub.cpp
  mpi/alltoallw.cpp mpi/datatype_large_counts.cpp
  mpi/handle_conversion.cpp mpi/info_queries.cpp mpi/status_setters.cpp
  mpi/error_classes.cpp mpi/datatype_envelope.cpp mpi/attr_mpi1.cpp)
target_sources(sempi_mpi PRIVATE mpi/abi_guard.cpp)
add_library(sempi::sempi_mpi ALIAS sempi_mpi)
# The ABI of the predefined handles (see abi_guard.cpp): 1 since communicators carry attributes
# and a shared error-handler slot.
set(SEMPI_MPI_ABI 1)
set_target_properties(sempi_mpi PROPERTIES
  OUTPUT_NAME sempi_mpi
  VERSION ${SEMPI_MPI_ABI}.${PROJECT_VERSION_MINOR}.${PROJECT_VERSION_PATCH}
  SOVERSION ${SEMPI_MPI_ABI}
  # Only what mpi.h declares is exported (it pushes default visibility).
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
target_include_directories(sempi_mpi
  PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
         $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
  PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(sempi_mpi PRIVATE sempi::sempi sempi_project_options)
install(TARGETS sempi_mpi EXPORT sempiTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# MPI_Comm_create_group needs the communicator factory, which lives inside libsempi.
target_sources(sempi PRIVATE mpi/bridge.cpp)

# --- compiler wrappers ---------------------------------------------------------------------------
# Two variants from one template: the build tree's (absolute paths into source and build tree,
# used by the tests) and the installed one (paths relative to its own location, so the install
# tree can move).
set(SEMPI_WRAPPER_EXTRA_FLAGS "")
if(SEMPI_SANITIZE)
  # The library is instrumented; programs linked against it must load the sanitizer runtime.
  set(SEMPI_WRAPPER_EXTRA_FLAGS "-fsanitize=${SEMPI_SANITIZE} -fno-omit-frame-pointer")
endif()
set(SEMPI_WRAPPER_SCRIPT_VERSION ${PROJECT_VERSION})

foreach(variant build install)
  if(variant STREQUAL "build")
    set(SEMPI_WRAPPER_PREFIX_CODE "prefix=''")
    set(SEMPI_WRAPPER_INCLUDEDIR "${PROJECT_SOURCE_DIR}/include")
    set(SEMPI_WRAPPER_LIBDIR "${CMAKE_LIBRARY_OUTPUT_DIRECTORY}")
    set(out_dir "${CMAKE_BINARY_DIR}/bin")
  else()
    set(SEMPI_WRAPPER_PREFIX_CODE
        "prefix=\"$(cd \"$(dirname \"$(readlink -f \"$0\")\")/..\" && pwd)\"")
    set(SEMPI_WRAPPER_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
    set(SEMPI_WRAPPER_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
    set(out_dir "${CMAKE_BINARY_DIR}/install-wrappers")
  endif()
  foreach(lang C CXX)
    if(lang STREQUAL "C")
      set(SEMPI_WRAPPER_NAME sempicc)
      set(SEMPI_WRAPPER_COMPILER "${CMAKE_C_COMPILER}")
      set(SEMPI_WRAPPER_COMPILER_ENV SEMPI_CC)
    else()
      set(SEMPI_WRAPPER_NAME sempicxx)
      set(SEMPI_WRAPPER_COMPILER "${CMAKE_CXX_COMPILER}")
      set(SEMPI_WRAPPER_COMPILER_ENV SEMPI_CXX)
    endif()
    configure_file(${PROJECT_SOURCE_DIR}/tools/sempicc/sempicc.in
                   ${out_dir}/${SEMPI_WRAPPER_NAME} @ONLY
                   FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                                    GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
endforeach()
install(PROGRAMS ${CMAKE_BINARY_DIR}/install-wrappers/sempicc
                 ${CMAKE_BINARY_DIR}/install-wrappers/sempicxx
        DESTINATION ${CMAKE_INSTALL_BINDIR})

# --- pkg-config ----------------------------------------------------------------------------------
# Relocatable: the prefix is found from the .pc file's own directory.
string(REGEX REPLACE "[^/]+" ".." SEMPI_PC_UP "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
configure_file(${PROJECT_SOURCE_DIR}/tools/sempicc/sempi-mpi.pc.in
               ${CMAKE_BINARY_DIR}/sempi-mpi.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sempi-mpi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
