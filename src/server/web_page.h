// The chat page served at `/`: plain HTML and JavaScript, no framework, no external requests.
#pragma once

#include <string_view>

namespace lockstep::server {

std::string_view WebPage();

}  // namespace lockstep::server
