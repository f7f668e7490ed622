// Counts global operator new calls, so a test can prove a code path allocates
// nothing: this test-support library replaces the global allocation functions
// of every test executable with counting wrappers around malloc.
#pragma once

#include <cstddef>

namespace hedge::test {

/// Number of global operator new / new[] calls (all threads) since start-up.
std::size_t allocation_count() noexcept;

/// Allocations made while the guard lived: `alloc_scope s; run(); EXPECT_EQ(s.count(), 0u);`
class alloc_scope {
 public:
  alloc_scope() noexcept : start_(allocation_count()) {}
  [[nodiscard]] std::size_t count() const noexcept { return allocation_count() - start_; }

 private:
  std::size_t start_;
};

/// Folder holding the shared test data (models/, routing/); may not exist.
inline const char* shared_dir() noexcept { return HEDGE_SHARED_DIR; }
/// The hedge source tree (for test data committed with the tests).
inline const char* source_dir() noexcept { return HEDGE_SOURCE_DIR; }

}  // namespace hedge::test
