// hedge/hedge.hpp: every portable hedge header (no OS-dependent ones: those,
// such as hedge/core/thread_pool.hpp, are included explicitly). The header
// check test fails when a portable header is missing here.
#pragma once

#include "hedge/core/arch.hpp"
#include "hedge/core/config.hpp"
#include "hedge/core/executor.hpp"
#include "hedge/core/function_ref.hpp"
#include "hedge/core/half.hpp"
#include "hedge/core/result.hpp"
#include "hedge/core/storage.hpp"
#include "hedge/core/view.hpp"
#include "hedge/kernels/gemv.hpp"
#include "hedge/kernels/matmul/avx2_gemv.hpp"
#include "hedge/kernels/matmul/avx2_primitives.hpp"
#include "hedge/kernels/matmul/scalar.hpp"
#include "hedge/quant/block_format.hpp"
#include "hedge/quant/float_formats.hpp"
#include "hedge/quant/q4_0.hpp"
#include "hedge/quant/q4_k.hpp"
#include "hedge/quant/q8_0.hpp"
#include "hedge/quant/q8_k.hpp"
