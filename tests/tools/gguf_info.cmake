# hedge-gguf-info end to end: --help, usage errors, the dump of stories260K.gguf (header,
# metadata, tensor table, llama hyperparameters), and a truncated copy and a missing file,
# each a message naming what is wrong and exit status 1.
# cmake -DINFO= -DMODEL= -DBINARY= -P gguf_info.cmake
file(REMOVE_RECURSE ${BINARY})
file(MAKE_DIRECTORY ${BINARY})

include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)

expect(0 "usage: hedge-gguf-info FILE" ${INFO} --help)
expect(2 "expected one FILE" ${INFO})
expect(2 "unknown option" ${INFO} --bogus)
expect(1 "cannot open ${BINARY}/absent.gguf: No such file or directory" ${INFO} ${BINARY}/absent.gguf)
expect(1 "cannot map ${BINARY}: Is a directory" ${INFO} ${BINARY})

if(NOT EXISTS ${MODEL})
  message("${MODEL} is absent: the dump of a real model was skipped")
  return()
endif()
foreach(text
    "GGUF version 3, 1185376 bytes, alignment 32, 19 metadata entries, 48 tensors, data at byte 14176"
    "[string]        512  tokenizer.ggml.tokens = [\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\""
    "uint32            1  llama.block_count = 5"
    "float32           1  llama.attention.layer_norm_rms_epsilon = 9.99999975e-06"
    "f32     172 x 64                         355840          44032  blk.0.ffn_down.weight"
    "tensor data: 1171200 bytes"
    "llama hyperparameters: dim 64, hidden_dim 172, layers 5, heads 8, kv heads 4, vocab 512")
  expect(0 "${text}" ${INFO} ${MODEL})
endforeach()

# The first 5000 bytes: the tokens array runs past the end.
set(truncated ${BINARY}/truncated.gguf)
execute_process(COMMAND head -c 5000 ${MODEL} OUTPUT_FILE ${truncated} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cannot write ${truncated}")
endif()
expect(1 "${truncated} does not load: truncated at byte 4996: string element needs 8 bytes, 4 left (element 370 of key 'tokenizer.ggml.tokens')"
       ${INFO} ${truncated})
