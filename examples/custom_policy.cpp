// A user-written routing policy dropped into hedge's router next to the built-in ones.
//
// `business_hours_policy` sends long prompts to the cloud only during office hours (when
// the cloud contract is cheaper, say). It is a plain type with a name and a noexcept const
// evaluate(request, context) returning a verdict: that is all RoutingPolicy asks for.
// Build: hedge_example_custom_policy. Run it to see each decision and its explanation.
#include <array>
#include <cstdio>
#include <string_view>

#include "hedge/route/context_fit_policy.hpp"
#include "hedge/route/health_policy.hpp"
#include "hedge/route/privacy_policy.hpp"
#include "hedge/route/router.hpp"

namespace {

using namespace hedge::route;

/// Reason codes of this policy, numbered from reason::user_first.
constexpr reason outside_business_hours = static_cast<reason>(static_cast<int>(reason::user_first) + 0);
constexpr reason long_prompt_in_hours = static_cast<reason>(static_cast<int>(reason::user_first) + 1);

class business_hours_policy {
 public:
  static constexpr std::string_view name = "business_hours";

  constexpr explicit business_hours_policy(int hour_of_day) noexcept : hour_(hour_of_day) {}

  [[nodiscard]] constexpr verdict evaluate(const route_request& request, const route_context&) const noexcept {
    if (hour_ < 9 || hour_ >= 18) return verdict::soft(-1.0, outside_business_hours, "night rate");
    return request.prompt.size() > 200 ? verdict::soft(1.0, long_prompt_in_hours, "day rate")
                                       : verdict::abstain();
  }

 private:
  int hour_;
};
static_assert(RoutingPolicy<business_hours_policy>);

}  // namespace

int main() {
  // Privacy and health first: their hard verdicts always win over the custom preference.
  router<privacy_policy, health_policy, context_fit_policy, business_hours_policy> day{
      privacy_policy{}, health_policy{}, context_fit_policy{}, business_hours_policy{11}};
  router<privacy_policy, health_policy, context_fit_policy, business_hours_policy> night{
      privacy_policy{}, health_policy{}, context_fit_policy{}, business_hours_policy{23}};

  const std::string_view long_prompt =
      "Draft a two-page summary of the attached quarterly report, covering revenue by region, the cost "
      "of goods sold, the hiring plan, the three largest risks and what the board asked us to change in "
      "the forecast since the last meeting.";
  const route_request requests[] = {
      {.prompt = long_prompt},
      {.prompt = "My IBAN is DE89 3704 0044 0532 0130 00, draft the transfer note."},
      {.prompt = "What is 2 + 2?"},
  };
  route_context context;
  std::array<char, 512> text{};
  for (const auto& r : requests) {
    explain(day.decide(r, context), text);
    std::printf("day:   %s\n", text.data());
    explain(night.decide(r, context), text);
    std::printf("night: %s\n", text.data());
  }
  context.offline = true;
  explain(day.decide(requests[0], context), text);
  std::printf("offline: %s\n", text.data());
  return 0;
}
