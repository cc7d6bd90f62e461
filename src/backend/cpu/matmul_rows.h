// Multi-row float dot kernels: one weight row against up to 4 activation rows at once. Each
// row's sum is formed in exactly quant::DotF32's order (8 lanes, multiply then add, tail into
// lanes 0.., fixed final tree), so the result equals DotRow bit for bit; only the number of
// independent chains in flight changes.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace lockstep::backend {

// True when a multi-row kernel exists for `t` on this CPU.
bool HasDotRows4(DType t);
// out[r] = dot(w_row, x[r]) for r < n_rows (n_rows <= 4); w_row holds n elements of type t.
void DotRows4(DType t, const void* w_row, const float* const* x, int n_rows, int64_t n, float* out);

}  // namespace lockstep::backend
