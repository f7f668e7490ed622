# hedge-route-eval and hedge-route-calibrate on bad arguments, unreadable inputs and
# unwritable outputs: each is a clear message on stderr (naming the file and the OS's
# reason where a file is involved) and a non-zero exit (1: an input, evaluation or output
# failed; 2: a usage error, the usage follows); --help is the usage on stdout and exit 0.
# Needs no data set: the script writes its own small CSV files, and trains its weights with
# hedge-route-train (whose format is not written here by hand).
# cmake -DTRAIN= -DCALIBRATE= -DEVAL= -DBINARY= -P route_tools_errors.cmake
file(REMOVE_RECURSE ${BINARY})
file(MAKE_DIRECTORY ${BINARY}/data ${BINARY}/out_dir)
set(data ${BINARY}/data)
foreach(domain IN ITEMS algebra biology)
  set(text "prompt,weak,strong\n")
  foreach(k RANGE 1 12)
    math(EXPR weak "${k} % 2")
    math(EXPR strong "(${k} % 3 + 1) / 2")
    string(APPEND text "\"Question ${k} on ${domain}: which of these, and why, in ${k} words?\",${weak},${strong}\n")
  endforeach()
  file(WRITE ${data}/${domain}.csv "${text}")
endforeach()
set(log ${BINARY}/log.csv)
file(WRITE ${log} "prompt\nhow many moons has Mars?\nexplain the proof of Fermat's last theorem\n")
set(weights ${BINARY}/weights.txt)
execute_process(COMMAND ${TRAIN} --out ${weights} ${data}/algebra.csv ${data}/biology.csv
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "hedge-route-train failed (${rc}): ${err}")
endif()

include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)

set(eval_out --csv ${BINARY}/out.csv --svg ${BINARY}/out.svg --hash-seeds 1)

# --help and unknown options, in both tools.
foreach(tool IN ITEMS ${EVAL} ${CALIBRATE})
  expect(0 "usage:" ${tool} --help)
  expect(2 "unknown option --bogus" ${tool} --bogus)
  expect(2 "usage:" ${tool} --bogus)
endforeach()
expect(0 "usage:" ${EVAL} --leave-domain-out ${data} --help)

# Empty strings where a path belongs: the empty --csv ended in an uncaught
# std::filesystem::filesystem_error (exit 134).
execute_process(COMMAND ${EVAL} --leave-domain-out ${data} --csv "" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
check("eval --csv ''" 2 "--csv needs a path")
execute_process(COMMAND ${EVAL} --leave-domain-out ${data} --svg "" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
check("eval --svg ''" 2 "--svg needs a path")
execute_process(COMMAND ${EVAL} --leave-domain-out "" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
check("eval --leave-domain-out ''" 2 "--leave-domain-out needs a path")
execute_process(COMMAND ${EVAL} --train "" --test ${data}/algebra.csv RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
check("eval --train ''" 2 "empty file name")
execute_process(COMMAND ${CALIBRATE} --weights "" --target-fraction 0.5 ${log} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
check("calibrate --weights ''" 2 "--weights needs a path")
execute_process(COMMAND ${CALIBRATE} --weights ${weights} --target-fraction 0.5 "" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
check("calibrate ''" 2 "empty file name")
execute_process(COMMAND ${CALIBRATE} --weights ${weights} --target-fraction "" ${log} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
check("calibrate --target-fraction ''" 2 "bad --target-fraction")

# Missing values.
expect(2 "--epochs needs a value" ${EVAL} --leave-domain-out ${data} --epochs)
expect(2 "--target-fraction needs a value" ${CALIBRATE} --weights ${weights} ${log} --target-fraction)
expect(2 "--weights needs a value" ${CALIBRATE} --target-fraction 0.5 ${log} --weights)
expect(2 "give one of --target-fraction and --target-quality" ${CALIBRATE} --weights ${weights} ${log})
expect(2 "give one of --target-fraction and --target-quality, once"
       ${CALIBRATE} --weights ${weights} --target-fraction 0.5 --target-quality 0.5 ${log})

# Numbers out of range or not finite.
foreach(value IN ITEMS nan inf -0.1 1.5 abc)
  expect(2 "bad --target-fraction '${value}'" ${EVAL} --leave-domain-out ${data} --target-fraction ${value})
  expect(2 "bad --target-fraction '${value}'" ${CALIBRATE} --weights ${weights} --target-fraction ${value} ${log})
  expect(2 "bad --target-quality '${value}'" ${CALIBRATE} --weights ${weights} --target-quality ${value} ${data}/algebra.csv)
endforeach()
foreach(bad IN ITEMS "--epochs;0" "--epochs;-1" "--learning-rate;0" "--learning-rate;nan" "--learning-rate;-1"
                     "--l2;-1" "--l2;inf" "--calibration-folds;-2" "--hash-seeds;0" "--limit;-1")
  list(GET bad 0 option)
  list(GET bad 1 value)
  expect(2 "bad ${option} '${value}'" ${EVAL} --leave-domain-out ${data} ${option} ${value})
endforeach()
# A learning rate that passes the range check but diverges: an error, not metrics of NaN scores.
expect(1 "the fit diverged" ${EVAL} --leave-domain-out ${data} --learning-rate 1e30 ${eval_out})
expect(1 "leave-domain-out needs at least 2" ${EVAL} --leave-domain-out ${data} --limit 1 ${eval_out})

# Inputs that are missing, directories, not directories, or unreadable.
set(missing ${BINARY}/missing.csv)
expect(1 "cannot open ${missing}: No such file or directory" ${EVAL} --train ${missing} --test ${data}/algebra.csv ${eval_out})
expect(1 "cannot open ${missing}: No such file or directory" ${CALIBRATE} --weights ${weights} --target-fraction 0.5 ${missing})
expect(1 "cannot open ${missing}: No such file or directory" ${CALIBRATE} --weights ${missing} --target-fraction 0.5 ${log})
expect(1 "cannot read ${data}: Is a directory" ${EVAL} --train ${data} --test ${data}/algebra.csv ${eval_out})
expect(1 "cannot read ${data}: Is a directory" ${CALIBRATE} --weights ${data} --target-fraction 0.5 ${log})
expect(1 "cannot read ${data}: Is a directory" ${CALIBRATE} --weights ${weights} --target-quality 0.5 ${data})
expect(1 "cannot list ${log}: Not a directory" ${EVAL} --leave-domain-out ${log} ${eval_out})
expect(1 "cannot list ${missing}: No such file or directory" ${EVAL} --leave-domain-out ${missing} ${eval_out})
expect(1 "cannot read /proc/self/mem: Input/output error" ${CALIBRATE} --weights ${weights} --target-fraction 0.5 /proc/self/mem)
expect(1 "${log}: complexity weights" ${CALIBRATE} --weights ${log} --target-fraction 0.5 ${log})
execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT uid STREQUAL "0")  # root reads a file whatever its mode
  file(WRITE ${BINARY}/locked.csv "prompt\nq\n")
  file(CHMOD ${BINARY}/locked.csv PERMISSIONS OWNER_WRITE)
  expect(1 "cannot open ${BINARY}/locked.csv: Permission denied"
         ${CALIBRATE} --weights ${weights} --target-fraction 0.5 ${BINARY}/locked.csv)
endif()
expect(1 "above all-cloud quality" ${CALIBRATE} --weights ${weights} --target-quality 0.99 ${data}/algebra.csv)

# Outputs that cannot be written: a missing directory, a directory, /proc, a full device
# (which fails only when the buffered text is flushed), and standard output on a full device.
# They used to print "cannot write PATH" and exit 0.
set(absent ${BINARY}/absent/route_eval.csv)
expect(1 "cannot write ${absent}: No such file or directory"
       ${EVAL} --leave-domain-out ${data} --hash-seeds 1 --csv ${absent} --svg ${BINARY}/out.svg)
expect(1 "cannot write ${BINARY}/out_dir: Is a directory"
       ${EVAL} --leave-domain-out ${data} --hash-seeds 1 --csv ${BINARY}/out.csv --svg ${BINARY}/out_dir)
expect(1 "cannot write /proc/route_eval.svg: "
       ${EVAL} --leave-domain-out ${data} --hash-seeds 1 --csv ${BINARY}/out.csv --svg /proc/route_eval.svg)
expect(1 "cannot write /dev/full: No space left on device"
       ${EVAL} --leave-domain-out ${data} --hash-seeds 1 --csv /dev/full --svg ${BINARY}/out.svg)
foreach(tool_args IN ITEMS "${EVAL};--leave-domain-out;${data};${eval_out}"
                           "${CALIBRATE};--weights;${weights};--target-fraction;0.5;${log}")
  execute_process(COMMAND ${tool_args} RESULT_VARIABLE rc OUTPUT_FILE /dev/full ERROR_VARIABLE err)
  check("${tool_args} > /dev/full" 1 "cannot write standard output: No space left on device")
endforeach()

# And the same runs succeed where they can write.
expect(0 "wrote ${BINARY}/out.csv" ${EVAL} --leave-domain-out ${data} ${eval_out})
expect(0 "threshold_logit=" ${CALIBRATE} --weights ${weights} --target-fraction 0.5 ${log})
