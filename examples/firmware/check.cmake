# The firmware.cortex_m7 test: cross-compiles examples/firmware for a Cortex-M7 (the image
# and portable_headers.cpp, every portable header), with MODEL (stories260K.gguf) quantized
# to Q8_0 by QUANTIZE (the host's hedge-quantize) and placed in its flash; proves with nm
# that the image links no heap and no exception runtime, prints its section sizes, and runs
# it on QEMU's mps2-an500 board (-icount shift=0: instruction counts are deterministic),
# checking its PASS line, its exit code and that the text it generates is run.c's output
# for the same prompt and positions byte for byte: REFERENCE's first line.
#   cmake -DHEDGE_ROOT=<src> -DBINARY=<dir> [-DQEMU=<qemu-system-arm>]
#         [-DMODEL=<stories260K.gguf> -DQUANTIZE=<hedge-quantize> -DREFERENCE=<run.c output>] -P check.cmake
# Without QEMU (qemu-system-arm not installed) the image is built and scanned but not
# run, and the test reports itself skipped. Without MODEL (../shared absent) the image
# runs its kernel checks alone.

function(check_or_fail rc what)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} (${rc})")
  endif()
endfunction()

set(model_options)
if(MODEL AND EXISTS ${MODEL})
  if(NOT QUANTIZE OR NOT EXISTS ${QUANTIZE})
    message(FATAL_ERROR "the firmware image's model needs the host's hedge-quantize, not built: '${QUANTIZE}' "
                        "(cmake --build <build> --target hedge-quantize)")
  endif()
  set(model_options -DHEDGE_FIRMWARE_GGUF=${MODEL} -DHEDGE_QUANTIZE=${QUANTIZE})
else()
  message(STATUS "no model ('${MODEL}' absent, ../shared/models): the image runs its kernel checks alone")
endif()

file(REMOVE_RECURSE ${BINARY})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${HEDGE_ROOT}/examples/firmware -B ${BINARY} -G Ninja
                        -DCMAKE_TOOLCHAIN_FILE=${HEDGE_ROOT}/cmake/toolchains/arm-none-eabi.cmake ${model_options}
                RESULT_VARIABLE rc)
check_or_fail("${rc}" "configuring the Cortex-M7 firmware example failed")
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} --target hedge_firmware.elf hedge_portable_headers heap_probe.elf
                RESULT_VARIABLE rc)
check_or_fail("${rc}" "the Cortex-M7 firmware example does not build")

# Symbols that mean a heap or the C++ exception runtime: exact names, then name prefixes.
set(heap_names "malloc|free|calloc|realloc|memalign|aligned_alloc|posix_memalign|_malloc_r|_free_r|_calloc_r|_realloc_r|_memalign_r|_sbrk|_sbrk_r")
set(runtime_prefixes "operator new|operator delete|__cxa_|__gxx_personality|_Unwind|__aeabi_unwind_cpp_pr")

# Sets `out` to the nm lines of `elf` that name a forbidden symbol.
function(forbidden_symbols elf out)
  execute_process(COMMAND arm-none-eabi-nm -C ${elf} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  check_or_fail("${rc}" "arm-none-eabi-nm ${elf} failed")
  string(REGEX MATCHALL "[^\n]* [A-Za-z] (${heap_names})\n" exact "${symbols}")
  string(REGEX MATCHALL "[^\n]* [A-Za-z] (${runtime_prefixes})[^\n]*" prefixed "${symbols}")
  set(lines ${exact} ${prefixed})
  list(TRANSFORM lines STRIP)
  list(JOIN lines "\n" text)
  set(${out} "${text}" PARENT_SCOPE)
  if(NOT symbols MATCHES "\n[0-9a-f]+ T main\n")
    message(FATAL_ERROR "no main in ${elf}: the symbol scan would be vacuous")
  endif()
endfunction()

# The control: an image with one `new` and one `throw` must be caught.
forbidden_symbols(${BINARY}/heap_probe.elf probe)
foreach(expected " operator new" " malloc" " _sbrk" " __cxa_throw" " _Unwind_")
  string(FIND "${probe}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the symbol scan misses '${expected}' in heap_probe.elf, which links it:\n${probe}")
  endif()
endforeach()

forbidden_symbols(${BINARY}/hedge_firmware.elf found)
if(found)
  message(FATAL_ERROR "the firmware image links the heap or the exception runtime:\n${found}")
endif()
message(STATUS "hedge_firmware.elf links no malloc/free/_sbrk, operator new/delete, __cxa_*, _Unwind* "
               "(the same scan finds them in heap_probe.elf)")

# Flash holds .text (code and constants), .ARM.exidx and the .data image; RAM holds
# .data, .bss and the stack.
execute_process(COMMAND arm-none-eabi-size -A ${BINARY}/hedge_firmware.elf OUTPUT_VARIABLE sizes RESULT_VARIABLE rc)
check_or_fail("${rc}" "arm-none-eabi-size failed")
foreach(section .text .ARM.exidx .data .bss .stack)
  string(REGEX MATCH "\n\\${section} +([0-9]+)" _ "${sizes}")
  set(size${section} ${CMAKE_MATCH_1})
  if(size${section} STREQUAL "")
    set(size${section} 0)
  endif()
endforeach()
math(EXPR flash "${size.text} + ${size.ARM.exidx} + ${size.data}")
math(EXPR ram "${size.data} + ${size.bss} + ${size.stack}")
message(STATUS "hedge_firmware.elf sections: .text ${size.text}  .data ${size.data}  .bss ${size.bss}  "
               ".stack ${size.stack}  (.ARM.exidx ${size.ARM.exidx}) bytes")
message(STATUS "hedge_firmware.elf cost: flash ${flash} bytes, RAM ${ram} bytes (stack included)")

if(NOT QEMU)
  message(STATUS "qemu-system-arm not found: the firmware image was not run (scripts/deps.sh installs it)")
  return()
endif()
execute_process(COMMAND ${QEMU} -M mps2-an500 -nographic -monitor none -serial none
                        -semihosting-config enable=on,target=native -icount shift=0
                        -kernel ${BINARY}/hedge_firmware.elf
                OUTPUT_VARIABLE output ERROR_VARIABLE output RESULT_VARIABLE rc TIMEOUT 60)
message(STATUS "qemu-system-arm -M mps2-an500 output (semihosting writes to stderr):\n${output}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the firmware run failed (exit status: ${rc})")
endif()
if(NOT output MATCHES "\nhedge firmware: PASS\n$" OR output MATCHES "FAIL")
  message(FATAL_ERROR "the firmware run did not end with 'hedge firmware: PASS'")
endif()
message(STATUS "the firmware image ran on mps2-an500 (Cortex-M7) and passed its checks")
if(NOT model_options)
  return()
endif()

# The generated text, between the marker lines, against run.c's: REFERENCE is run.c's
# output for -n 256, and the image runs 61 positions, where run.c's first line ends (run.c
# -n 61 prints that line and its closing newline).
set(begin "hedge firmware: run.c text begins\n")
set(end "hedge firmware: run.c text ends\n")
string(FIND "${output}" "${begin}" at)
string(FIND "${output}" "${end}" stop)
if(at EQUAL -1 OR stop EQUAL -1)
  message(FATAL_ERROR "the firmware run printed no generated text between its marker lines")
endif()
string(LENGTH "${begin}" skip)
math(EXPR from "${at} + ${skip}")
math(EXPR length "${stop} - ${from}")
string(SUBSTRING "${output}" ${from} ${length} text)
if(NOT REFERENCE OR NOT EXISTS ${REFERENCE})
  message(FATAL_ERROR "run.c's reference output '${REFERENCE}' is missing")
endif()
file(READ ${REFERENCE} reference)
string(FIND "${reference}" "\n" line_end)
math(EXPR line_length "${line_end} + 1")
string(SUBSTRING "${reference}" 0 ${line_length} expected)
if(NOT text STREQUAL expected)
  message(FATAL_ERROR "the firmware's text is not run.c's:\n--- firmware\n${text}--- run.c (${REFERENCE}, first line)\n${expected}")
endif()
string(LENGTH "${text}" text_bytes)
message(STATUS "the firmware's greedy text equals run.c's byte for byte (${text_bytes} bytes, 61 positions)")
# Under -icount shift=0 one emulated instruction takes 1 ns of virtual time and SysTick
# runs at mps2-an500's 25 MHz: 40 instructions per tick.
if(output MATCHES "decode: ([0-9]+) tokens, ([0-9]+) SysTick ticks/token")
  math(EXPR instructions "${CMAKE_MATCH_2} * 40")
  message(STATUS "decode: ${instructions} emulated instructions per token (QEMU -icount shift=0)")
endif()
