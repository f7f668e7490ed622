# Configure and build tests/headers as its own project with one compiler and
# xsimd mode: cmake -DSOURCE= -DBINARY= -DCOMPILER= -DNO_SIMD= -DHEDGE_ROOT= -P run.cmake
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G Ninja -DCMAKE_CXX_COMPILER=${COMPILER}
                        -DHEDGE_ROOT=${HEDGE_ROOT} -DHEDGE_NO_SIMD=${NO_SIMD} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the header check failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a header does not compile on its own (see the compiler output above)")
endif()
