# hedge-route-train's usage and errors, on small CSV files written here: --help, usage
# errors (exit 2, with the usage), fit parameters checked before any file is read, a fit
# that diverges refused before anything is written, and errors that name the file and the
# reason (exit 1); the weights file it writes ends in its 'end' record, and cut short it is
# refused by hedge-route-calibrate.
# cmake -DTRAIN= -DCALIBRATE= -DBINARY= -P route_train.cmake
file(REMOVE_RECURSE ${BINARY})
file(MAKE_DIRECTORY ${BINARY})
set(data ${BINARY}/train.csv)
file(WRITE ${data} "prompt,weak,strong
prove the integral converges,False,True
what colour is the sky,True,True
derive the eigenvalues of the matrix,False,True
name a fruit,True,True
\"prove the lemma, by induction\",False,True
what colour is grass,True,False
")
set(weights ${BINARY}/weights.txt)

include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)

expect(0 "usage: hedge-route-train --out WEIGHTS" ${TRAIN} --help)
expect(2 "unknown option --bogus\nusage: hedge-route-train" ${TRAIN} --out ${weights} --bogus ${data})
expect(2 "option --epochs needs a value\nusage:" ${TRAIN} --out ${weights} ${data} --epochs)
expect(2 "no --out file\nusage:" ${TRAIN} ${data})
expect(2 "bad value for --target-fraction: '1.5'" ${TRAIN} --out ${weights} --target-fraction 1.5 ${data})
expect(2 "bad fit parameters: learning rate" ${TRAIN} --out ${weights} --learning-rate 0 ${data})
expect(2 "bad fit parameters: learning rate" ${TRAIN} --out ${weights} --learning-rate -1 ${BINARY}/never_read.csv)
expect(2 "bad value for --learning-rate: 'nan'" ${TRAIN} --out ${weights} --learning-rate nan ${data})
expect(2 "bad fit parameters: epochs 0 outside" ${TRAIN} --out ${weights} --epochs 0 ${data})
expect(2 "bad fit parameters: L2 penalty" ${TRAIN} --out ${weights} --l2 -1 ${data})

# A step of 1e30 passes the up-front check but diverges to NaN weights: exit 1, no file.
expect(1 "the fit diverged" ${TRAIN} --out ${weights} --learning-rate 1e30 ${data})
if(EXISTS ${weights})
  message(FATAL_ERROR "a diverged fit wrote ${weights}")
endif()

expect(1 "cannot open ${BINARY}/missing.csv: No such file or directory" ${TRAIN} --out ${weights} ${BINARY}/missing.csv)
file(WRITE ${BINARY}/broken.csv "prompt,weak,strong\nsome prompt,maybe,True\n")
expect(1 "${BINARY}/broken.csv line 2: outcome is not" ${TRAIN} --out ${weights} ${BINARY}/broken.csv)
expect(1 "${BINARY}/no/such/dir/weights.txt: No such file or directory" ${TRAIN} --out ${BINARY}/no/such/dir/weights.txt ${data})

expect(0 "threshold_logit=" ${TRAIN} --out ${weights} --epochs 5 ${data})
file(READ ${weights} text)
if(NOT text MATCHES "\nend [0-9]+\n$")
  message(FATAL_ERROR "the weights file must end with its 'end <records>' record:\n${text}")
endif()
execute_process(COMMAND ${CALIBRATE} --weights ${weights} --target-fraction 0.5 ${data}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hedge-route-calibrate refused the weights just written (${rc}): ${err}")
endif()
# Cut after 5 lines, or inside the last weight line: refused, not read as fewer weights.
string(REGEX MATCH "^([^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n[^\n]*\n)" first_lines "${text}")
string(REGEX REPLACE "[0-9]\nend [0-9]+\n$" "" cut_mid_line "${text}")
foreach(cut first_lines cut_mid_line)
  file(WRITE ${BINARY}/${cut}.txt "${${cut}}")
  execute_process(COMMAND ${CALIBRATE} --weights ${BINARY}/${cut}.txt --target-fraction 0.5 ${data}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "truncated")
    message(FATAL_ERROR "weights cut (${cut}) must be refused as truncated (${rc}): ${err}")
  endif()
endforeach()
