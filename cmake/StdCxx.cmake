# libstdc++ must be linked as the shared library, never copied into libsinga.
#
# g++ links `-lstdc++`, which finds libstdc++.so (the development link) or else libstdc++.a. A
# machine with the runtime (libstdc++.so.6) but not the link (the GPU image, 2026-11-26/27) got a
# libsinga with its own copy of the parts it used: the C++ tests, which see one copy, passed,
# while in Python, where the system's libstdc++ was already loaded, the first exception message
# built with an ostream crashed the process (two copies of the locale machinery). When the link
# is missing, one to the runtime is made in the build folder and searched first.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                  OUTPUT_VARIABLE _stdcxx_so OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT IS_ABSOLUTE "${_stdcxx_so}" OR NOT EXISTS "${_stdcxx_so}")
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
                    OUTPUT_VARIABLE _stdcxx_so6 OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(IS_ABSOLUTE "${_stdcxx_so6}" AND EXISTS "${_stdcxx_so6}")
      set(_stdcxx_dir ${CMAKE_BINARY_DIR}/stdcxx-link)
      file(MAKE_DIRECTORY ${_stdcxx_dir})
      file(CREATE_LINK ${_stdcxx_so6} ${_stdcxx_dir}/libstdc++.so SYMBOLIC)
      add_link_options(-L${_stdcxx_dir})
      message(STATUS "singa: ${CMAKE_CXX_COMPILER} has no libstdc++.so (only the static "
                     "library would be found): linking ${_stdcxx_so6} through ${_stdcxx_dir}")
    else()
      message(WARNING "singa: neither libstdc++.so nor libstdc++.so.6 is found by "
                      "${CMAKE_CXX_COMPILER}: libsinga would carry its own copy of libstdc++, "
                      "which crashes a Python process that loaded the system's")
    endif()
  endif()
endif()
