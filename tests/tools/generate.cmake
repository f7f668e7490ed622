# hedge-generate end to end: --help and usage errors; a missing model and a llama2.c
# checkpoint without its tokenizer (messages naming the file and the reason); and, with
# ../shared/models, llama2.c run's reference texts reproduced from the .bin + tok512.bin and
# from the GGUF: greedy without and with a prompt, and sampled with run's generator.
# cmake -DGENERATE= -DMODELS= -DBINARY= -P generate.cmake
file(REMOVE_RECURSE ${BINARY})
file(MAKE_DIRECTORY ${BINARY})
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)

expect(0 "usage: hedge-generate -m MODEL" ${GENERATE} --help)
expect(2 "no -m MODEL" ${GENERATE} -n 5)
expect(2 "unknown option --bogus" ${GENERATE} --bogus 1)
expect(2 "option -n needs a value" ${GENERATE} -m x -n)
expect(2 "bad value for -t: '-1'" ${GENERATE} -m x -t -1)
expect(2 "bad value for --quantize: 'q5_0'" ${GENERATE} -m x --quantize q5_0)
expect(1 "cannot open ${BINARY}/absent.gguf: No such file or directory" ${GENERATE} -m ${BINARY}/absent.gguf)

if(NOT EXISTS ${MODELS}/stories260K.bin)
  message("${MODELS} is absent: generation from a real model was skipped")
  return()
endif()
expect(1 "is not a GGUF: a llama2.c checkpoint needs -z TOKENIZER" ${GENERATE} -m ${MODELS}/stories260K.bin)
expect(1 "cannot open ${BINARY}/absent.bin: No such file or directory"
       ${GENERATE} -m ${MODELS}/stories260K.bin -z ${BINARY}/absent.bin)

# run(<name> <reference file> <args>...): stdout equals the reference byte for byte.
function(run name reference)
  execute_process(COMMAND ${GENERATE} ${ARGN} RESULT_VARIABLE rc OUTPUT_FILE ${BINARY}/${name}.txt ERROR_VARIABLE err)
  file(READ ${BINARY}/${name}.txt got)
  file(READ ${MODELS}/reference/${reference} want)
  if(NOT rc EQUAL 0 OR NOT got STREQUAL want)
    message(SEND_ERROR "${name}: exit ${rc}, ${err}\noutput differs from ${reference}:\n${got}")
  endif()
  if(NOT err MATCHES "prefill: [0-9]+ tokens, [0-9.]+ tok/s\ndecode: [0-9]+ tokens, [0-9.]+ tok/s")
    message(SEND_ERROR "${name}: no prefill/decode lines on stderr: ${err}")
  endif()
endfunction()
set(bin -m ${MODELS}/stories260K.bin -z ${MODELS}/tok512.bin)
set(gguf -m ${MODELS}/stories260K.gguf)
run(bin-greedy llama2c_noprompt_n256.txt ${bin} -t 0 -n 256)
run(bin-greedy-512 llama2c_noprompt_n512.txt ${bin} -t 0 -n 512)
run(gguf-prompt llama2c_prompt_onceuponatime_n256.txt ${gguf} -t 0 -n 256 -i "Once upon a time")
run(bin-sampled llama2c_t1.0_p0.9_s133742_n256.txt ${bin} -t 1.0 -p 0.9 -s 133742 --rng llama2c -n 256)
run(gguf-sampled llama2c_t1.0_p0.9_s133742_n256.txt ${gguf} -t 1.0 -p 0.9 -s 133742 --rng llama2c -n 256)
run(bin-greedy-2-threads llama2c_noprompt_n256.txt ${bin} -t 0 -n 256 --threads 2)

# --print-ids: the prompt's ids then the generated ones, as run's input stream (ids.txt).
execute_process(COMMAND ${GENERATE} ${bin} -t 0 -n 256 -i "Once upon a time" --print-ids
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET)
file(STRINGS ${MODELS}/reference/llama2c_prompt_onceuponatime_n256.ids.txt rows REGEX "^[0-9]")
set(want "ids:")
foreach(row IN LISTS rows)
  string(REGEX REPLACE "^[0-9]+ ([0-9]+) [0-9]+$" "\\1" input "${row}")
  if(NOT input STREQUAL "1")
    string(APPEND want " ${input}")
  endif()
endforeach()
list(GET rows -1 last)
string(REGEX REPLACE "^[0-9]+ [0-9]+ ([0-9]+)$" "\\1" last "${last}")
string(APPEND want " ${last}")
string(FIND "${out}" "${want}\n" at)
if(NOT rc EQUAL 0 OR at EQUAL -1)
  message(SEND_ERROR "--print-ids: expected '${want}', got:\n${out}")
endif()
