// The os/ headers a tool built with -fno-exceptions -fno-rtti uses (tools/ are): compiled, not
// run, by the block in tests/CMakeLists.txt.
#include <atomic>
#include <string_view>

#include "hedge/os/api_key.hpp"
#include "hedge/os/http_transport.hpp"
#include "hedge/os/steady_clock.hpp"

hedge::result<void> hedge_no_exceptions_send(hedge::os::curl_transport& transport, const std::atomic<bool>& cancel) {
  HEDGE_TRY(hedge::os::load_api_key());
  const hedge::cloud::http_request request{"GET", "/models", {}, {}};
  auto head = [](const hedge::cloud::http_response_head&) { return true; };
  auto body = [](std::string_view) { return true; };
  (void)hedge::os::steady_clock{}.now();
  return transport.send(request, {}, {head, body, &cancel});
}
