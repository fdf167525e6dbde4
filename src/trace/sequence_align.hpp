// Alignment of two op-name sequences (a step against the template): which of their ops correspond, in order.
// Used by step detection (trace/iteration.hpp: which steps are regular) and the step variants
// (trace/step_variants.hpp: the blocks some steps run and others do not).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gearshift::trace {

// Longest-common-subsequence alignment of `b` (m names) to `a` (Myers' O((N+M)·D) greedy diff, E. Myers, "An
// O(ND) difference algorithm and its variations", Algorithmica 1986: steps that differ by a few hundred
// data-dependent kernels align in a few ms where the edit-distance table would take 30 M cells). For every
// position of `a`, the index in `b` matched to it, or -1. Empty when more than `max_d` inserted plus missing
// names separate them (the caller's bound on how different they may be).
std::vector<std::int64_t> align_lcs(const std::vector<std::uint32_t>& a, const std::uint32_t* b, std::size_t m,
                                    std::size_t max_d);

}  // namespace gearshift::trace
