// libFuzzer target: the CSV cursor and the labelled-data parser on arbitrary bytes. The
// cursor must always make progress and every field view must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hedge/route/csv.hpp"
#include "hedge/route/training.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  hedge::route::csv_cursor cursor{text};
  std::size_t fields = 0;
  while (!cursor.done()) {
    auto f = cursor.next();
    if (!f) break;
    if (!f->raw.empty() && (f->raw.data() < text.data() || f->raw.data() + f->raw.size() > text.data() + text.size()))
      std::abort();
    std::size_t n = 0;
    hedge::route::csv_unescape(*f, [&](char) { ++n; });
    if (n > f->raw.size()) std::abort();
    if (++fields > size + 1) std::abort();  // no progress
  }
  (void)hedge::route::parse_labelled_csv(text);
  return 0;
}
