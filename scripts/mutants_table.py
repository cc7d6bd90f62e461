#!/usr/bin/env python3
"""The mutation table of scripts/mutants.sh: each mutant is exact text edits to one file of src/
plus the gtest filter expected to kill it. An edit whose text does not occur exactly once is an
error, so a refactor that moves the code fails loudly instead of testing an unmutated tree.
A mutant named *_avx512 edits code of the AVX-512 level only: mutants.sh skips it, visibly, on a
CPU without that level (whose tests skip the level too)."""
import sys
from pathlib import Path

MM = "src/backend/cpu/matmul.cpp"
ATTN = "src/backend/cpu/attention.cpp"
ENGINE = "src/engine/engine.cpp"
STEP = "src/engine/engine_step.cpp"
FWD = "src/model/forward.cpp"
SAMPLER = "src/sample/sampler.cpp"
CLI_COMMON = "src/cli/common.cpp"
CPU_BACKEND = "src/backend/cpu/cpu_backend.cpp"

# Recomputes y = x . w^T with a scalar sum in reverse element order when x has at least
# `min_rows` rows: a kernel whose order depends on the batch shape.
REVERSE_HELPER = """}  // namespace

void MutantReverse(const Weight& w, const Tensor& x, Tensor* y, int64_t min_rows) {
  if (x.rows() < min_rows) return;
  std::vector<float> wr(static_cast<size_t>(x.cols()));
  for (int64_t j = 0; j < w.n_rows(); ++j) {
    WeightRowF32(w, j, wr.data());
    for (int64_t r = 0; r < x.rows(); ++r) {
      float s = 0.0f;
      for (int64_t i = x.cols(); i-- > 0;) s += wr[static_cast<size_t>(i)] * x.row(r)[i];
      y->row(r)[j] = s;
    }
  }
}

float* CpuBackend::RowsScratch(int worker) {"""


def reverse_edits(min_rows):
    return [
        ("}  // namespace\n\nfloat* CpuBackend::RowsScratch(int worker) {", REVERSE_HELPER),
        # After both splits of MatMuls (MatMul is MatMuls of one output), so every path is hit.
        ("RowsScratch(worker), quant_tiles_);\n      }\n    });\n  }\n",
         "RowsScratch(worker), quant_tiles_);\n      }\n    });\n  }\n"
         f"  for (const MatMulOut& o : outs) MutantReverse(*o.w, x, o.y, {min_rows});\n"),
    ]


PACKED_512 = "src/quant/dot_packed_avx512.cpp"
PACKED_B32_512 = "src/quant/dot_packed_b32_avx512.cpp"
PACKED_2_H = "src/quant/dot_packed_avx2.h"
PREPARE_2 = "src/quant/prepare_avx2.cpp"
TANH_LANES = "src/backend/cpu/tanh_lanes_x86.h"
ACT_ROWS = "src/backend/cpu/activation_rows.cpp"
KV_VIEW = "src/backend/kv_view.cpp"
F32_BLOCK = "src/quant/dot_f32_block_x86.h"

SAMPLE_POS = "sample_rows_.push_back({s.req.sampling, pos + 1, {recent_.data() + at, n}});"

# name -> (file, [(old, new), ...], gtest filter expected to kill it, what it breaks)
MUTANTS = {
    "matmul_ulp_multirow": (MM, [(
        "      MatMulRowsBlock(blk, scratch);\n",
        "      MatMulRowsBlock(blk, scratch);\n"
        "      if (n_rows > 1) blk.y[0] = __builtin_nextafterf(blk.y[0], __builtin_inff());\n")],
        "*ForwardInvariance*", "multi-row float matmul result off by 1 ulp"),
    "matmul_reverse_rows_gt1": (MM, reverse_edits(2), "*ForwardInvariance*",
                                "MatMul/MatMuls sum in reverse order when rows > 1"),
    "matmul_reverse_rows_gt32": (MM, reverse_edits(33), "*ForwardInvariance*",
                                 "reverse summation only when rows > 32"),
    "attention_block_reads_past_own_keys": (ATTN, [(
        "  return {std::max(t0, qs.lo[j]), std::min(t0 + n, qs.last[j] + 1)};",
        "  return {std::max(t0, qs.lo[j]), t0 + n};")],
        "*ForwardInvariance*", "a query of a row block also reads the later rows' keys"),
    "attention_rows_one_slice": (ATTN, [(
        "    const int slice = j / qs.per_slice;",
        "    const int slice = 0;")],
        "*EngineExactness*-*NegativeControl*", "a decode row's item reads every head against its first KV head's slice"),
    "rope_table_ignores_positions": (CPU_BACKEND, [(
        "std::equal(pos.begin(), pos.end(), t.pos.begin(), t.pos.end())",
        "pos.size() == t.pos.size()")],
        "*ForwardInvariance*:*EngineExactness*-*NegativeControl*", "RoPE reuses the angles of other positions of the same row count"),
    "verify_position_off_by_one": (ENGINE, [(
        SAMPLE_POS,
        "sample_rows_.push_back({s.req.sampling, pos + 1 + (s.decoding && r > s.row_begin ? 1 : 0),"
        " {recent_.data() + at, n}});")],
        "*SpecExactness*", "sampling position off by one on verify rows"),
    "drafter_wrong_hidden_row": (STEP, [(
        "        hidden_out = s.out_begin + accepted;",
        "        hidden_out = s.out_begin + (accepted > 0 ? accepted - 1 : 0);")],
        "*DrafterInput*:*LabAccept*", "drafter fed the hidden state of the wrong row"),
    "kv_written_after_attention": (FWD, [
        ("    be.KvWrite(kv.store->View(kv.layer), k, v, ctx.rows);\n", ""),
        ("kv.include_self, ctx.rows, &attn);\n",
         "kv.include_self, ctx.rows, &attn);\n"
         "  if (kv.write) be.KvWrite(kv.store->View(kv.layer), k, v, ctx.rows);\n")],
        "*ForwardInvariance*", "KV rows written after attention reads them"),
    "rng_keyed_by_batch_index": (ENGINE, [(
        SAMPLE_POS,
        "sample_rows_.push_back({s.req.sampling, static_cast<int64_t>(r) + 1,"
        " {recent_.data() + at, n}});")],
        "*SpecExactness*:*EngineExactness*-*NegativeControl*", "per-sequence RNG keyed by batch row instead of position"),
    "sliding_window_off_by_one": (ATTN, [(
        "  return window > 0 ? std::max(0, pos - window + 1) : 0;",
        "  return window > 0 ? std::max(0, pos - window + 2) : 0;")],
        "*TargetParity*", "sliding window one key short"),
    "prefill_chunk_off_by_one": (STEP, [(
        "std::min({n_prompt, s.n_cached + opt_.prefill_chunk, s.n_cached + left});",
        "std::min({n_prompt, s.n_cached + opt_.prefill_chunk + 1, s.n_cached + left});")],
        "*LabTeacherForce*:*EngineExactness*-*NegativeControl*", "a prefill chunk one row longer than the chunk size"),
    "gumbel_per_call": (SAMPLER, [
        ("  auto consider = [&](int32_t i) {\n",
         "  static thread_local int64_t calls = 0;\n  const int64_t call = ++calls;\n"
         "  auto consider = [&](int32_t i) {\n"),
        ("UniformAt(s.seed, position, i)", "UniformAt(s.seed, position ^ (call << 40), i)")],
        "*Sample*:*SpecExactness*", "Gumbel noise drawn per call instead of per position"),
    "gelu_rows_reassociated": (TANH_LANES, [(
        "O::Mul(O::Mul(O::Mul(c, x), x), x)",
        "O::Mul(c, O::Mul(O::Mul(x, x), x))")],
        "ActivationRows.*", "the vector GELU rows (AVX2 and AVX-512) multiply in another order than the scalar GELU"),
    "prepare_ties_toward_zero_avx2": (PREPARE_2, [(
        "_mm256_cmp_ps(f, neg_half, _CMP_LE_OQ)", "_mm256_cmp_ps(f, neg_half, _CMP_LT_OQ)")],
        "QuantPrepare.*", "AVX2 PrepareRow rounds negative half-way levels toward zero"),
    "tanh_lanes_reassociated": (TANH_LANES, [(
        "O::Add(r, O::Mul(O::Mul(r, r), p))", "O::Add(r, O::Mul(r, O::Mul(r, p)))")],
        "ActivationRows.*", "the vector tanh (AVX2 and AVX-512) groups its polynomial's last product differently from the scalar Tanh"),
    "softmax_sum_tail_lane_shifted": (ACT_ROWS, [(
        "  for (; i < n; ++i) lanes[i % 8] += x[i];", "  for (; i < n; ++i) lanes[(i + 1) % 8] += x[i];")],
        "ActivationRows.*", "a softmax row's last n % 8 weights go into the next lane of the sum"),
    "kv_rows_ignore_wrap": (KV_VIEW, [(
        "    const int run = std::min(n - c, unit - (pos + c) % unit);",
        "    const int run = std::min(n - c, unit);")],
        "KvLayerView.*:*ForwardInvariance*", "attention's key rows run past a ring wrap or a page end"),
    "scores_tree_regrouped": (F32_BLOCK, [(
        "_mm_add_ps(_mm256_castps256_ps128(v[c]), _mm256_extractf128_ps(v[c], 1))",
        "_mm_add_ps(_mm256_castps256_ps128(v[c]), _mm_permute_ps(_mm256_extractf128_ps(v[c], 1), 0xB1))")],
        "QuantDot.F32Block*", "the attention scores' vector tree pairs lane k with lane 4 + (k ^ 1)"),
    "packed_q5k_high_bit_avx512": (PACKED_512, [(
        "_mm512_slli_epi32(h, 3), m10)", "_mm512_slli_epi32(h, 4), m10)")],
        "*QuantPackedIsa*", "AVX-512 packed Q5_K gives sub-block 2p + 1 sub-block 2p's high bit"),
    "packed_unit_partial_avx2": (PACKED_2_H, [(
        "const int64_t p = (kU * b + j) & 7;", "const int64_t p = (b + j) & 7;")],
        "*QuantPackedIsa*", "AVX2 two-block packing units (Q4_0, MXFP4) add into other partials"),
    "packed_e8m0_subnormal_avx512": (PACKED_B32_512, [(
        "_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2))",
        "_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(1))")],
        "*QuantPackedIsa*", "AVX-512 packed MXFP4 takes E8M0 exponent 1 as a normal number"),
    "row_slab_reads_first_slab": (MM, [(
        "prepared + r0, n_rows, y->row(r0) + j0", "prepared, n_rows, y->row(r0) + j0")],
        "QuantPacked.BackendMatMulEqualsDotRow", "a decode batch split by row slabs gives every slab the first slab's activations"),
    "row_slabs_drop_rows": (MM, [(
        "x.rows() == kSlabRows * threads", "x.rows() >= kSlabRows * threads")],
        "QuantPacked.BackendMatMulEqualsDotRow", "a batch of more rows than a slab a thread is split into slabs that leave the last rows out"),
    "compare_exit_always_zero": (CLI_COMMON, [(
        "plain.begin(), plain.end()) ? 0 : 1;", "plain.begin(), plain.end()) ? 0 : 0;")],
        "GenerateCli.Compare*", "generate --compare exits 0 when speculative and plain differ"),
}


def apply(tree, name):
    path, edits, _, _ = MUTANTS[name]
    f = Path(tree) / path
    text = f.read_text()
    for old, new in edits:
        n = text.count(old)
        if n != 1:
            sys.exit(f"mutant {name}: {path}: expected text found {n} times, not once:\n{old}")
        text = text.replace(old, new)
    f.write_text(text)


def main(argv):
    if len(argv) >= 2 and argv[1] == "list":  # name<TAB>file<TAB>filter<TAB>description
        for name, (path, _, filt, what) in MUTANTS.items():
            print(f"{name}\t{path}\t{filt}\t{what}")
    elif len(argv) == 4 and argv[1] == "apply":
        if argv[3] not in MUTANTS:
            sys.exit(f"unknown mutant {argv[3]}")
        apply(argv[2], argv[3])
    else:
        sys.exit("usage: mutants_table.py list | apply TREE NAME")


if __name__ == "__main__":
    main(sys.argv)
