# hedge-route-calibrate end to end: train on some MMLU domains, re-calibrate on the prompts
# of others (their outcome columns ignored), and check the quantile rule lands on the
# target there; bad input is an error with a message, not a crash. Tied scores first, on a
# file written here (no data set needed).
# cmake -DTRAIN= -DCALIBRATE= -DEVAL= -DDATA=<shared>/routing/mmlu -DBINARY= -P route_calibrate.cmake
file(MAKE_DIRECTORY ${BINARY})

# Four copies of one prompt, each weak wrong and strong right: their scores tie, and a
# threshold sends all four to the cloud or none. Quality 0.5 needs the four (it printed
# cloud_fraction=0.0000 quality=0.0000); a cloud fraction of 0.5 gets the nearer of 0 and 1
# (equally near: the fewer cloud calls), with a note that ties kept it off the target.
set(tied ${BINARY}/tied.csv)
file(WRITE ${tied} "prompt,weak,strong\n")
foreach(k RANGE 1 4)
  file(APPEND ${tied} "\"Which planet is largest?\",0,1\n")
endforeach()
file(WRITE ${BINARY}/tied_train.csv "prompt,weak,strong\nWhich planet is largest?,0,1\nName a prime number,1,1\n")
execute_process(COMMAND ${TRAIN} --out ${BINARY}/tied_weights.txt ${BINARY}/tied_train.csv
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hedge-route-train failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${CALIBRATE} --weights ${BINARY}/tied_weights.txt --target-quality 0.5 ${tied}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "cloud_fraction=1\\.0000 prompts=4 quality=1\\.0000")
  message(FATAL_ERROR "tied prompts must go to the cloud together to reach quality 0.5 (${rc}):\n${out}")
endif()
execute_process(COMMAND ${CALIBRATE} --weights ${BINARY}/tied_weights.txt --target-fraction 0.5 ${tied}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "cloud_fraction=0\\.0000 prompts=4" OR NOT err MATCHES "cannot be split")
  message(FATAL_ERROR "a cloud fraction that ties cannot reach must be reported (${rc}):\n${out}${err}")
endif()

if(NOT EXISTS ${DATA}/mmlu_anatomy.csv)
  message(STATUS "SKIP: ${DATA} is absent")
  return()
endif()
set(weights ${BINARY}/weights.txt)
execute_process(COMMAND ${TRAIN} --out ${weights} --epochs 1 ${DATA}/mmlu_anatomy.csv ${DATA}/mmlu_astronomy.csv
                        ${DATA}/mmlu_virology.csv
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hedge-route-train failed (${rc})")
endif()
execute_process(COMMAND ${CALIBRATE} --weights ${weights} --target-fraction 0.25 ${DATA}/mmlu_marketing.csv
                        ${DATA}/mmlu_nutrition.csv
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out MATCHES "cloud_fraction=(0\\.2[4-6][0-9]*) prompts=([0-9]+)")
  message(FATAL_ERROR "hedge-route-calibrate missed the 0.25 target (${rc}):\n${out}")
endif()
if(NOT CMAKE_MATCH_2 EQUAL 540)
  message(FATAL_ERROR "expected the 540 prompts of two files, got ${CMAKE_MATCH_2}")
endif()
execute_process(COMMAND ${CALIBRATE} --weights ${weights} --target-quality 0.99 ${DATA}/mmlu_marketing.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 1 OR NOT err MATCHES "above all-cloud quality")
  message(FATAL_ERROR "an unreachable quality target must fail with a message (${rc}): ${err}")
endif()
file(WRITE ${BINARY}/broken.csv "prompt\n\"never closed")
execute_process(COMMAND ${CALIBRATE} --weights ${weights} --target-fraction 0.5 ${BINARY}/broken.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 1 OR NOT err MATCHES "broken.csv")
  message(FATAL_ERROR "a malformed log must fail naming the file (${rc}): ${err}")
endif()
# A number that does not parse is a usage error naming the option, in both tools (it used
# to read as 0: a cloud-fraction target of 0 is valid and silently sent nothing out).
execute_process(COMMAND ${CALIBRATE} --weights ${weights} --target-fraction abc ${DATA}/mmlu_marketing.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "bad --target-fraction")
  message(FATAL_ERROR "a malformed target must be a usage error (${rc}): ${err}")
endif()
execute_process(COMMAND ${TRAIN} --out ${BINARY}/unused.txt --epochs 3x ${DATA}/mmlu_anatomy.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "bad value for --epochs")
  message(FATAL_ERROR "a malformed epoch count must be a usage error (${rc}): ${err}")
endif()
# A model trained with another feature hash seed records it, and calibration scores with it:
# the same weights read as seed 0 give other scores, hence another threshold.
set(seeded ${BINARY}/weights_seed3.txt)
execute_process(COMMAND ${TRAIN} --out ${seeded} --epochs 1 --hash-seed 3 ${DATA}/mmlu_anatomy.csv
                        ${DATA}/mmlu_astronomy.csv ${DATA}/mmlu_virology.csv
                RESULT_VARIABLE rc OUTPUT_QUIET)
file(READ ${seeded} text)
if(NOT rc EQUAL 0 OR NOT text MATCHES "\nhash_seed 3\n")
  message(FATAL_ERROR "hedge-route-train --hash-seed 3 must write 'hash_seed 3' (${rc})")
endif()
string(REPLACE "\nhash_seed 3\n" "\nhash_seed 0\n" relabelled "${text}")
file(WRITE ${BINARY}/weights_seed3_read_as_0.txt "${relabelled}")
foreach(file seed3 seed3_read_as_0)
  execute_process(COMMAND ${CALIBRATE} --weights ${BINARY}/weights_${file}.txt --target-fraction 0.25
                          ${DATA}/mmlu_marketing.csv ${DATA}/mmlu_nutrition.csv
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "threshold_logit=([-+0-9.eE]+) cloud_fraction=(0\\.2[4-6][0-9]*) prompts=540")
    message(FATAL_ERROR "calibration with ${file} missed the 0.25 target (${rc}):\n${out}")
  endif()
  set(threshold_${file} ${CMAKE_MATCH_1})
endforeach()
if(threshold_seed3 STREQUAL threshold_seed3_read_as_0)
  message(FATAL_ERROR "the hash seed changed no score: threshold ${threshold_seed3} either way")
endif()
execute_process(COMMAND ${TRAIN} --out ${BINARY}/unused.txt --hash-seed -1 ${DATA}/mmlu_anatomy.csv
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "bad value for --hash-seed")
  message(FATAL_ERROR "a malformed hash seed must be a usage error (${rc}): ${err}")
endif()
# hedge-route-eval refuses to write its curve CSV into the directory it evaluates (the next
# run would read it as a domain), before it loads anything.
execute_process(COMMAND ${EVAL} --leave-domain-out ${DATA} --csv ${DATA}/route_eval.csv --svg ${BINARY}/eval.svg
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "would write into the --leave-domain-out directory" OR EXISTS ${DATA}/route_eval.csv)
  message(FATAL_ERROR "hedge-route-eval must refuse a --csv inside the evaluated directory (${rc}): ${err}")
endif()
