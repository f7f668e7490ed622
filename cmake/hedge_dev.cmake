# Settings for hedge's own tests, benchmarks, examples and tools (never applied
# to consumers of hedge::hedge).

option(HEDGE_WERROR "Treat warnings as errors in hedge's own targets" OFF)

# hedge_dev_options(<target>): warnings, and -ffp-contract=off so reference
# quantizers produce the same bytes as ggml's (no fused multiply-add rounding).
function(hedge_dev_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -ffp-contract=off)
  if(HEDGE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  target_link_libraries(${target} PRIVATE hedge::hedge)
endfunction()

# hedge_layer_dirs(<out> <root>): sub-folders of <root> that hold .cpp files.
function(hedge_layer_dirs out root)
  file(GLOB children RELATIVE ${root} CONFIGURE_DEPENDS ${root}/*)
  set(dirs "")
  foreach(child IN LISTS children)
    if(IS_DIRECTORY ${root}/${child})
      file(GLOB sources CONFIGURE_DEPENDS ${root}/${child}/*.cpp)
      if(sources)
        list(APPEND dirs ${child})
      endif()
    endif()
  endforeach()
  set(${out} ${dirs} PARENT_SCOPE)
endfunction()

# hedge_find_http_libraries(): HEDGE_HAVE_CURL (libcurl, under os/http_transport.hpp) is ON
# when libcurl is found and its header compiles with this build's compiler, and the imported
# target CURL::libcurl exists in the calling folder; HEDGE_HAVE_SERVER (hedge-server: its own
# HTTP server, os/http_server.hpp, on Linux's epoll, and rapidjson as the top level found it
# for hedge::hedge) is ON on Linux with rapidjson. A cross build (scripts/matrix.sh's aarch64
# cells) finds only the host's libcurl, whose header does not compile for the target: there
# the programs and tests on it are left out, with a message, and the portable layers (cloud/
# included) are compiled as everywhere.
macro(hedge_find_http_libraries)
  include(CheckIncludeFileCXX)
  find_package(CURL QUIET)
  if(CURL_FOUND)
    set(CMAKE_REQUIRED_INCLUDES ${CURL_INCLUDE_DIRS})
    check_include_file_cxx(curl/curl.h HEDGE_CURL_HEADER_COMPILES)
    unset(CMAKE_REQUIRED_INCLUDES)
  endif()
  set(HEDGE_HAVE_CURL OFF)
  if(CURL_FOUND AND HEDGE_CURL_HEADER_COMPILES)
    set(HEDGE_HAVE_CURL ON)
  endif()
  set(HEDGE_HAVE_SERVER OFF)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND HEDGE_USES_RAPIDJSON)
    set(HEDGE_HAVE_SERVER ON)
  endif()
endmacro()
