// Template: parses once, renders many times; turns interpreter errors into Status values that
// name the template line.
#include "template/template.h"

#include <fmt/format.h>

#include "template/ast.h"
#include "template/builtins.h"
#include "template/interpreter.h"

namespace lockstep::jinja {
namespace {

Status ErrorStatus(const Error& e) {
  if (e.line() > 0) return Status::Errorf("template line {}: {}", e.line(), e.what());
  return Status::Error(std::string("template: ") + e.what());
}

}  // namespace

Expected<Template> Template::Parse(const std::string& source) {
  try {
    Template t;
    t.program_ = std::make_shared<const std::vector<Stmt>>(jinja::Parse(source));
    return t;
  } catch (const Error& e) {
    return ErrorStatus(e);
  }
}

Expected<std::string> Template::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) return Status::Error("template context must be a JSON object");
  try {
    Scope root;
    root.vars = Globals();
    for (auto it = context.begin(); it != context.end(); ++it)
      root.Set(it.key(), Value::FromJson(*it));
    Interpreter interp;
    std::string out;
    if (interp.Exec(*program_, root, out) != Flow::kNormal)
      return Status::Error("template: 'break' or 'continue' outside a loop");
    return out;
  } catch (const Error& e) {
    return ErrorStatus(e);
  } catch (const std::exception& e) {
    return Status::Errorf("template: {}", e.what());
  }
}

}  // namespace lockstep::jinja
