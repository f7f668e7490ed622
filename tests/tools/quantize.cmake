# hedge-quantize end to end: --help, usage errors, a missing input and an unwritable output
# (each a message naming the file and the reason), and stories260K.gguf quantized to each
# mix: the output parses (hedge-gguf-info), its tensors have the types llama.cpp's quantize
# gives them (its 64-wide rows take the K-quants' fallbacks), and its metadata is kept.
# (That the files are byte-identical to llama.cpp's quantize's is
# scripts/llama_cpp_quantize_check.sh.) (That llama.cpp loads these outputs and generates
# the ids hedge does is model.LlamaForward.QuantizedFilesGiveLlamaCppsGreedyIds.)
# cmake -DQUANTIZE= -DINFO= -DMODEL= -DBINARY= -P quantize.cmake
file(REMOVE_RECURSE ${BINARY})
file(MAKE_DIRECTORY ${BINARY})
include(${CMAKE_CURRENT_LIST_DIR}/expect.cmake)

expect(0 "usage: hedge-quantize IN.gguf OUT.gguf Q4_K_M|Q5_K_M|Q8_0|Q4_0" ${QUANTIZE} --help)
expect(2 "expected IN.gguf OUT.gguf TYPE" ${QUANTIZE} a.gguf)
expect(2 "unknown mix 'q5_0' (Q4_K_M, Q5_K_M, Q8_0 or Q4_0)" ${QUANTIZE} a.gguf b.gguf q5_0)
expect(1 "cannot open ${BINARY}/absent.gguf: No such file or directory" ${QUANTIZE} ${BINARY}/absent.gguf ${BINARY}/out.gguf q8_0)

if(NOT EXISTS ${MODEL})
  message("${MODEL} is absent: quantizing a real model was skipped")
  return()
endif()
expect(1 "${BINARY}/no/such/dir/out.gguf: No such file or directory" ${QUANTIZE} ${MODEL} ${BINARY}/no/such/dir/out.gguf q8_0)
expect(1 "cannot write /dev/full: No space left on device" ${QUANTIZE} ${MODEL} /dev/full q8_0)

# mix: (tensor line of hedge-gguf-info that must appear) ...
set(q8_0_expect "q8_0    64 x 64" "blk.0.attn_q.weight" "f16     172 x 64" "q8_0    64 x 512" "general.file_type = 7")
set(q4_0_expect "q4_0    64 x 64" "q8_0    64 x 512" "f32     64 " "general.file_type = 2")
# (attn_v of layer 2 is Q6_K's fallback Q8_0: 2176 bytes; of layer 1 Q4_K's Q5_0: 1408)
set(Q4_K_M_expect "q5_0    64 x 64" "2176  blk.2.attn_v.weight" "1408  blk.1.attn_v.weight" "q8_0    64 x 512"
                  "f16     172 x 64" "general.file_type = 15")
set(Q5_K_M_expect "q5_1    64 x 64" "2176  blk.2.attn_v.weight" "24576  token_embd.weight" "general.file_type = 17")
foreach(type q8_0 q4_0 Q4_K_M Q5_K_M)
  set(out ${BINARY}/stories-${type}.gguf)
  expect(0 "wrote ${out}: 37 of 48 tensors converted" ${QUANTIZE} ${MODEL} ${out} ${type})
  foreach(text "llama hyperparameters: dim 64, hidden_dim 172, layers 5, heads 8, kv heads 4, vocab 512"
               "tokenizer.ggml.tokens" "general.quantization_version = 2" ${${type}_expect})
    expect(0 "${text}" ${INFO} ${out})
  endforeach()
endforeach()
