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
