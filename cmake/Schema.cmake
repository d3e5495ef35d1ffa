# The op schema (schema/<theme>.py): schema/gen_schema.py writes the C++ glue of its rows into the
# build tree (never committed): the OpIds, the public header, the functors, the slots, fronts and
# kernels that ops/elementwise.cc, ops/cpu/elementwise.cc and ops/cuda/elementwise_unary.cu
# include. cython/CMakeLists.txt generates the Python side from the same rows.
if(Python_EXECUTABLE)
  set(SINGA_GEN_PYTHON ${Python_EXECUTABLE})
else()  # a C++-only build still needs an interpreter for the generator (standard library only)
  find_program(SINGA_GEN_PYTHON NAMES python3 python REQUIRED)
endif()
set(SINGA_GEN_DIR ${CMAKE_BINARY_DIR}/gen)
set(SINGA_SCHEMA_THEME ${CMAKE_SOURCE_DIR}/schema/activations.py)
set(SINGA_SCHEMA_NN ${CMAKE_SOURCE_DIR}/schema/nn.py)
set(SINGA_SCHEMA_DEPS ${SINGA_SCHEMA_THEME} ${SINGA_SCHEMA_NN} ${CMAKE_SOURCE_DIR}/schema/rows.py
    ${CMAKE_SOURCE_DIR}/schema/gen_schema.py ${CMAKE_SOURCE_DIR}/schema/gen_nn.py)
set(_ops ${SINGA_GEN_DIR}/include/singa/ops)
set(_src ${SINGA_GEN_DIR}/src)
# The generator rewrites a file only when its text changes (so nothing recompiles for nothing);
# the stamp is what the build compares against the schema's files.
add_custom_command(
  OUTPUT ${SINGA_GEN_DIR}/schema.stamp
  BYPRODUCTS ${_ops}/activation_ids.def ${_ops}/activation.h ${_ops}/activation_functors.h
             ${_src}/activation_fronts.inc ${_src}/activation_cpu.inc ${_src}/activation_cuda.inc
             ${_ops}/nn_ids.def ${_ops}/nn_schema.h ${_src}/nn_args.inc ${_src}/nn_launch.inc
             ${_src}/nn_slots.inc ${_src}/epilogue_ops.inc
  COMMAND ${SINGA_GEN_PYTHON} ${CMAKE_SOURCE_DIR}/schema/gen_schema.py cpp ${SINGA_SCHEMA_THEME}
          ${SINGA_GEN_DIR}
  COMMAND ${SINGA_GEN_PYTHON} ${CMAKE_SOURCE_DIR}/schema/gen_schema.py nn ${SINGA_SCHEMA_NN}
          ${SINGA_GEN_DIR}
  COMMAND ${CMAKE_COMMAND} -E touch ${SINGA_GEN_DIR}/schema.stamp
  DEPENDS ${SINGA_SCHEMA_DEPS}
  COMMENT "Generating the op schema's C++ glue from schema/activations.py and nn.py")
add_custom_target(singa_schema DEPENDS ${SINGA_GEN_DIR}/schema.stamp)
# Configure time too: the first compile's dependency scan must find the headers.
execute_process(COMMAND ${SINGA_GEN_PYTHON} ${CMAKE_SOURCE_DIR}/schema/gen_schema.py cpp
                        ${SINGA_SCHEMA_THEME} ${SINGA_GEN_DIR}
                COMMAND ${SINGA_GEN_PYTHON} ${CMAKE_SOURCE_DIR}/schema/gen_schema.py nn
                        ${SINGA_SCHEMA_NN} ${SINGA_GEN_DIR} COMMAND_ERROR_IS_FATAL ANY)
add_dependencies(singa singa_schema)
target_include_directories(singa PUBLIC $<BUILD_INTERFACE:${SINGA_GEN_DIR}/include>
                           PRIVATE ${_src})
if(NOT SKBUILD)
  install(DIRECTORY ${SINGA_GEN_DIR}/include/singa DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()
