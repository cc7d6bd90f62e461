// Ordering of template values (the `sort` and `dictsort` filters).
#pragma once

#include "template/value.h"

namespace lockstep::jinja {

// -1, 0 or 1; numbers and booleans compare as numbers, strings by UTF-16 code units (lower-cased
// unless case_sensitive); other pairs cannot be compared and throw Error.
int Compare(const Value& a, const Value& b, bool case_sensitive);

// `mapping | dictsort(case_sensitive=false, by='key', reverse=false)`: [key, value] pairs.
Value DictSort(const Value& object, const Args& args);

}  // namespace lockstep::jinja
