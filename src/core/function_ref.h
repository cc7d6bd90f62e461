// A non-owning reference to a callable: passing a lambda to a hot function without the heap
// allocation a std::function may make (lockstep's decode step allocates nothing).
#pragma once

#include <type_traits>
#include <utility>

namespace lockstep {

template <typename Sig>
class FunctionRef;

// The referenced callable must outlive the FunctionRef (pass it down a call, never store it).
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): a drop-in for std::function params
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace lockstep
