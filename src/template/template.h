// A small, general Jinja interpreter (lexer, parser to a syntax tree, evaluator) for chat
// templates, rendering byte for byte like @huggingface/jinja, the reference the tests use.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace lockstep::jinja {

struct Stmt;

class Template {
 public:
  // Parses `source`; an unknown statement, filter or test, or malformed syntax, is an error
  // naming the template line.
  static Expected<Template> Parse(const std::string& source);

  // Renders with `context`'s top-level keys as variables (an object; mapping order is kept, as
  // the reference engine keeps JavaScript object order). Runtime errors name the line.
  Expected<std::string> Render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const std::vector<Stmt>> program_;
};

}  // namespace lockstep::jinja
