// hedge/model/chat_message.hpp: one message of a conversation, as views.
//
// The one chat message type of every layer: the chat templates render it (model/), the
// cloud client writes it into requests (cloud::chat_message is this type), the engine and
// the server pass it along. Views: whoever holds the conversation keeps the text alive.
#pragma once

#include <string_view>

namespace hedge::model {

struct chat_message {
  std::string_view role;  ///< "system", "user", "assistant", ...
  std::string_view content;
};

}  // namespace hedge::model
