// hedge/kernels/matmul/gemv_streams.hpp: the order in which an interleaved GEMV reads
// a run of 8-row groups from DRAM.
//
// A group is contiguous in memory (repack.hpp), 9 KiB of Q4_0 at K = 2048. A tile of
// gemv_streams consecutive groups therefore reads that many short streams, and all
// but the first start afresh at every tile: the hardware prefetchers must find them
// again, and the software prefetch a fixed distance ahead in each (avx2::prefetch_ahead)
// lands, near a group's end, in the next group, which the tile's next stream has already
// read. So the run's full groups are split into gemv_streams contiguous parts, and tile i
// takes group i of every part: each stream is then one part, read front to back, with
// the prefetch always ahead of it in the same stream. Q4_0 at 5632x2048 streamed from
// DRAM at 1 thread on a Zen 5 core: 23.7 GB/s in consecutive tiles, 39.9 GB/s in long
// streams, against a read bandwidth of 36.5-37.6 GB/s (docs/perf-journal.md).
//
// Which group a row belongs to does not change its arithmetic, so the results are the
// same bits in either order, for any thread count.
#pragma once

#include <cstddef>

#include "hedge/kernels/repack.hpp"

namespace hedge::kernels::matmul {

/// Groups a GEMV tile reads at once, each from its own stream; the AVX2 and AVX-512 VNNI
/// tiles may read 2 instead, as the CPU's tuner picks (weight_read.hpp).
inline constexpr std::size_t gemv_streams = 4;

/// A run of `groups` groups with `valid` rows in all, split for the long-stream order into
/// `streams` streams: tile i (i < per_stream) takes groups i, per_stream + i, 2 per_stream
/// + i, ...; the groups from streamed() on (fewer than `streams` full ones, then any
/// partial one) are the caller's.
struct stream_split {
  std::size_t full;        ///< leading groups whose 8 rows are all valid
  std::size_t streams;     ///< streams the full groups are cut into
  std::size_t per_stream;  ///< groups in each stream

  constexpr stream_split(std::size_t groups, std::size_t valid, std::size_t streams = gemv_streams) noexcept
      : full(valid / interleave_rows < groups ? valid / interleave_rows : groups),
        streams(streams),
        per_stream(full / streams) {}

  constexpr std::size_t streamed() const noexcept { return per_stream * streams; }
};

}  // namespace hedge::kernels::matmul
