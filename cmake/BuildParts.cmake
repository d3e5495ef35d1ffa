# The optional parts of the build: the GoogleTest suite (SINGA_BUILD_TESTS) and the Cython
# extension (SINGA_BUILD_PYTHON). Each takes AUTO, ON or OFF:
#   AUTO (default)  build the part when its dependencies are found; otherwise say what is missing
#                   and skip it, so a C++-only machine (no gtest, no Python, no numpy) configures
#   ON              the dependencies are required: configuring fails, naming what is missing (the
#                   Makefile passes ON, so a broken environment fails loudly instead of skipping)
#   OFF             skip the part without looking
# Each sets SINGA_WITH_TESTS / SINGA_WITH_PYTHON (TRUE or FALSE) for the CMakeLists.txt files.

foreach(_part TESTS PYTHON)
  if(NOT DEFINED SINGA_BUILD_${_part})
    set(SINGA_BUILD_${_part} AUTO)
  endif()
  set(SINGA_BUILD_${_part} "${SINGA_BUILD_${_part}}" CACHE STRING
      "Build the ${_part} part of singa: AUTO (when its dependencies are found), ON or OFF" FORCE)
  set_property(CACHE SINGA_BUILD_${_part} PROPERTY STRINGS AUTO ON OFF)
endforeach()

# singa_part_mode(<var> <out>): AUTO, ON or OFF from the user's value (any CMake boolean works).
function(singa_part_mode var out)
  string(TOUPPER "${${var}}" v)
  if(v STREQUAL "AUTO")
    set(${out} AUTO PARENT_SCOPE)
  elseif(v MATCHES "^(ON|YES|Y|TRUE|1)$")
    set(${out} ON PARENT_SCOPE)
  elseif(v MATCHES "^(OFF|NO|N|FALSE|0)$")
    set(${out} OFF PARENT_SCOPE)
  else()
    message(FATAL_ERROR "singa: ${var} is '${${var}}'; expected AUTO, ON or OFF")
  endif()
endfunction()

# singa_part_missing(<part> <mode> <missing...>): skips the part (AUTO) or stops (ON).
macro(singa_part_missing part var mode)
  string(REPLACE ";" "; " _missing "${ARGN}")
  if("${mode}" STREQUAL "ON")
    message(FATAL_ERROR "singa: ${var}=ON but ${part} cannot be built: missing ${_missing}. "
                        "Install what is missing, or configure with -D${var}=OFF (or AUTO)")
  endif()
  # NOTICE (stderr): seen even when the configure output goes to /dev/null.
  message(NOTICE "-- singa: ${part} skipped (${var}=AUTO): missing ${_missing}; "
                 "pass -D${var}=OFF to build without it silently")
endmacro()

# ---- the GoogleTest suite --------------------------------------------------------------------
singa_part_mode(SINGA_BUILD_TESTS _tests_mode)
set(SINGA_WITH_TESTS FALSE)
if(NOT _tests_mode STREQUAL "OFF")
  find_package(GTest CONFIG QUIET)
  if(GTest_FOUND)
    set(SINGA_WITH_TESTS TRUE)
  else()
    singa_part_missing("the C++ tests (tests/cpp)" SINGA_BUILD_TESTS ${_tests_mode}
      "GoogleTest (Debian: apt-get install libgtest-dev)")
  endif()
endif()

# ---- the Python extension (singa.singa_wrap) -------------------------------------------------
singa_part_mode(SINGA_BUILD_PYTHON _python_mode)
set(SINGA_WITH_PYTHON FALSE)
if(NOT _python_mode STREQUAL "OFF")
  # Each piece is checked through the interpreter first: FindPython rejects an interpreter that
  # lacks any component and then reports every component as missing.
  find_package(Python QUIET COMPONENTS Interpreter)
  set(_py_missing "")
  if(NOT Python_Interpreter_FOUND)
    list(APPEND _py_missing "a Python 3 interpreter (pass -DPython_EXECUTABLE=...)")
  else()
    foreach(_check
        "Python.h|import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))|the Python headers (Debian: apt-get install python3-dev)"
        "numpy|import numpy|numpy (pip install numpy)"
        "Cython|import Cython|Cython (pip install cython)")
      string(REPLACE "|" ";" _check "${_check}")
      list(GET _check 1 _code)
      list(GET _check 2 _what)
      execute_process(COMMAND ${Python_EXECUTABLE} -c "${_code}" RESULT_VARIABLE _rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(NOT _rc EQUAL 0)
        list(APPEND _py_missing "${_what} for ${Python_EXECUTABLE}")
      endif()
    endforeach()
    if(NOT _py_missing)
      find_package(Python QUIET COMPONENTS Interpreter Development.Module NumPy)
      if(NOT Python_FOUND)
        list(APPEND _py_missing
             "the Development.Module and NumPy parts FindPython looks for (${Python_EXECUTABLE})")
      endif()
    endif()
  endif()
  if(_py_missing)
    singa_part_missing("the Python extension (singa.singa_wrap)" SINGA_BUILD_PYTHON
                       ${_python_mode} ${_py_missing})
  else()
    set(SINGA_WITH_PYTHON TRUE)
  endif()
endif()
message(STATUS "singa: C++ tests ${SINGA_WITH_TESTS}, Python extension ${SINGA_WITH_PYTHON} "
               "(SINGA_BUILD_TESTS=${SINGA_BUILD_TESTS}, SINGA_BUILD_PYTHON=${SINGA_BUILD_PYTHON})")
