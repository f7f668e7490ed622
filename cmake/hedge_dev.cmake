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

# hedge_find_http_libraries(): HEDGE_HAVE_CURL (libcurl, under os/http_transport.hpp) and
# HEDGE_HAVE_HTTPLIB (cpp-httplib, and rapidjson as the top level found it for hedge::hedge,
# under hedge-server) are ON when the library
# is found and its header compiles with this build's compiler, and the imported targets
# CURL::libcurl and PkgConfig::HEDGE_HTTPLIB exist in the calling folder. A cross build
# (scripts/matrix.sh's aarch64 cells) finds only the host's libraries, whose headers do not
# compile for the target: there the programs and tests on these adapters are left out, with
# a message, and the portable layers (cloud/ included) are compiled as everywhere.
macro(hedge_find_http_libraries)
  include(CheckIncludeFileCXX)
  find_package(CURL QUIET)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND AND NOT TARGET PkgConfig::HEDGE_HTTPLIB)
    pkg_check_modules(HEDGE_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
  endif()
  if(CURL_FOUND)
    set(CMAKE_REQUIRED_INCLUDES ${CURL_INCLUDE_DIRS})
    check_include_file_cxx(curl/curl.h HEDGE_CURL_HEADER_COMPILES)
    unset(CMAKE_REQUIRED_INCLUDES)
  endif()
  if(HEDGE_HTTPLIB_FOUND AND HEDGE_USES_RAPIDJSON)
    set(CMAKE_REQUIRED_INCLUDES ${HEDGE_HTTPLIB_INCLUDE_DIRS})
    set(CMAKE_REQUIRED_DEFINITIONS ${HEDGE_HTTPLIB_CFLAGS_OTHER})  # TLS and compression on, as linked
    check_include_file_cxx(httplib.h HEDGE_HTTPLIB_HEADER_COMPILES)
    unset(CMAKE_REQUIRED_INCLUDES)
    unset(CMAKE_REQUIRED_DEFINITIONS)
  endif()
  set(HEDGE_HAVE_CURL OFF)
  if(CURL_FOUND AND HEDGE_CURL_HEADER_COMPILES)
    set(HEDGE_HAVE_CURL ON)
  endif()
  set(HEDGE_HAVE_HTTPLIB OFF)
  if(HEDGE_HTTPLIB_FOUND AND HEDGE_USES_RAPIDJSON AND HEDGE_HTTPLIB_HEADER_COMPILES)
    set(HEDGE_HAVE_HTTPLIB ON)
  endif()
endmacro()
