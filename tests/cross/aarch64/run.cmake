# Cross-builds tests/cross/aarch64 and runs it under qemu-aarch64 -cpu max:
# cmake -DHEDGE_ROOT=<src> -DBINARY=<dir> -P run.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -S ${HEDGE_ROOT}/tests/cross/aarch64 -B ${BINARY} -G Ninja
                        -DCMAKE_BUILD_TYPE=Release
                        -DCMAKE_TOOLCHAIN_FILE=${HEDGE_ROOT}/cmake/toolchains/aarch64-linux-gnu.cmake
                RESULT_VARIABLE rc)
if(rc EQUAL 0)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the AArch64 tests do not build")
endif()
execute_process(COMMAND qemu-aarch64 -cpu max ${BINARY}/hedge_test_aarch64 --gtest_brief=1 RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the AArch64 tests fail under qemu-aarch64")
endif()
