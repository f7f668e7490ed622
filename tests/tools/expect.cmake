# The shared checks of the tools' end-to-end scripts: include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake).
#
# check(<what> <exit code> <text>): the last run (rc, out, err in the caller's scope) exited
# with <exit code> and its stderr holds <text> literally (stdout for exit 0). Failures are
# collected, not fatal, so one run of a script lists them all.
function(check what code text)
  set(stream "${err}")
  if(code EQUAL 0)
    set(stream "${out}")
  endif()
  string(FIND "${stream}" "${text}" at)
  if(NOT rc STREQUAL code OR at EQUAL -1)
    message(SEND_ERROR "${what}: expected exit ${code} and '${text}', got exit ${rc}:\n${out}\n${err}")
  endif()
endfunction()

# expect(<exit code> <text> <command>...): runs the command, then check(). (Empty-string
# arguments do not survive a list expansion: such cases call execute_process and check.)
function(expect code text)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  check("${ARGN}" ${code} "${text}")
endfunction()
