// Position predictor: follows the live launch stream against the iteration template.
//
// Locked, it keeps a small beam of alignment hypotheses (template position, cost) and advances them with each
// launch: a launch matching a position d ahead costs (d-1) skips, a launch matching nothing near costs one
// insertion, a launch of another name but the same kernel class as the next position (cuBLAS picking another
// GEMM variant for another sequence length) costs one substitution; the cheapest hypothesis is the answer. This absorbs inserted, missing and swapped kernels without
// losing lock. After `lost_after` unmatched launches in a row it falls back to searching: it looks for the
// position whose preceding template names match the recent launches uniquely and locks there.
// Step variants (trace/step_variants.hpp: a block some steps insert, template positions some steps leave out,
// or other ops some steps run in their place; Megatron-LM's gradient clipping is 292 kernels in some
// iterations, an MoE's radix sort one kernel or eight ops) are optional spans of the sequence the beam walks:
// it enters or jumps over one at no cost, so neither variant loses lock. An inserted launch is
// reported at the template position it follows (Alignment::variant), where its clocks come from.
// Not thread-safe: one thread (the runtime thread, or replay) drives it.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/kernel_class.hpp"
#include "runtime/string_map.hpp"

namespace gearshift::runtime {

enum class PredictorState { searching, locked };
const char* to_string(PredictorState s);

struct PredictorOptions {
  int insert_cost = 2;          // cost of a launch that matches no template position near
  int skip_cost = 1;            // cost per template position skipped (a missing kernel)
  int substitute_cost = 1;      // a kernel of the next position's class under another name
  int beam = 16;                // keep hypotheses within this cost of the best (16: an expert block skipped)
  std::size_t max_hypotheses = 32;
  int lost_after = 12;          // unmatched launches in a row before the lock is dropped
  std::size_t min_context = 3;  // launches that must agree before (re)locking
  std::size_t history = 4096;   // launches remembered for resynchronisation
  int max_jumps = 2;            // optional spans one launch may jump over in a row
};

// A step variant over the template (runtime::PlanVariant's kernel names): `names` launched after template
// position `after` (-1: before the first) in place of the `skip` positions after it; no names: a skip, skip 0:
// an insertion, both: an alternative.
struct VariantBlock {
  std::int64_t after = -1;
  std::vector<std::string> names;
  std::size_t skip = 0;
};

struct Alignment {
  PredictorState state = PredictorState::searching;
  std::int64_t position = -1;  // absolute position (step × size + template index); -1 while searching
  bool matched = false;        // the launch matched the template at `position`
  bool substituted = false;    // it took `position` as a kernel of the same class under another name
  bool variant = false;        // an inserted launch of a step variant, reported at the position it follows
  // It took the place the predictor expected next (the next one, or the first after optional spans skipped):
  // the prediction accuracy's hit.
  bool expected = false;
};

class PositionPredictor {
 public:
  // Throws std::invalid_argument for an empty template, a variant outside it, or one without names and skip.
  explicit PositionPredictor(const std::vector<std::string>& template_names, PredictorOptions options = {},
                             const std::vector<VariantBlock>& variants = {});

  // Template id of a kernel name, -1 when the template lacks it. Interning once per name keeps observe cheap.
  std::int32_t id_of(std::string_view name) const;
  // The kernel class (model::classify) of a name, from the template when it has the name.
  model::KernelClass class_of(std::string_view name) const;
  // `id` from id_of; `cls` the launch's kernel class (none: no substitution considered).
  Alignment observe(std::int32_t id, std::optional<model::KernelClass> cls = std::nullopt);
  // Interns the class of names the template lacks (a few GEMM variants), so a live stream classifies each once.
  Alignment observe(std::string_view name);

  PredictorState state() const { return state_; }
  // Absolute position expected for the next launch; -1 while searching.
  std::int64_t next_position() const;
  std::size_t size() const { return n_; }  // template positions (absolute positions count in these)
  std::uint64_t relocks() const { return relocks_; }  // times it locked (first lock included)
  std::uint64_t losses() const { return losses_; }    // times it lost lock

 private:
  enum class Step : std::uint8_t { match, substitute, insert };  // how a hypothesis took the last launch
  struct Hyp {
    std::int64_t abs;
    int cost;
    int miss_run;  // launches in a row not matched by name
    Step step;
  };
  Alignment search();
  std::int32_t at(std::int64_t abs) const;
  std::size_t index(std::int64_t abs) const;  // abs mod the sequence's length
  // Hypotheses taking launch `id` by name from sequence position q on (walk cost `cost` so far).
  void reach(std::int64_t q, int cost, int base, int jumps, std::int32_t id);
  bool follows(std::int64_t from, std::int64_t to) const;  // `to` is next after `from`, optional spans skipped
  Alignment report(std::int64_t abs, bool matched, bool substituted, bool expected) const;

  PredictorOptions o_;
  std::size_t n_ = 0;                                   // template positions
  // The sequence the beam walks: the template with the variants' inserted blocks in place. Absolute positions
  // inside the predictor count in it; reported ones in template positions.
  std::vector<std::int32_t> seq_;                       // ids
  std::vector<std::size_t> tmpl_of_;                    // sequence index -> template position it reports
  std::vector<bool> inserted_;                          // sequence index holds an inserted launch
  std::vector<std::vector<std::size_t>> jumps_;         // sequence index -> lengths of optional spans from it
  std::vector<std::vector<std::size_t>> where_;         // id -> template positions
  std::vector<model::KernelClass> class_;               // id -> kernel class
  StringMap<model::KernelClass> foreign_;  // classes of names not in the template
  StringMap<std::int32_t> ids_;
  std::deque<std::int32_t> hist_;
  std::vector<Hyp> hyps_, next_;
  PredictorState state_ = PredictorState::searching;
  std::int64_t last_abs_ = -1;       // last placed absolute position, in the sequence
  std::uint64_t since_lost_ = 0;     // launches while searching
  std::uint64_t relocks_ = 0, losses_ = 0;
};

}  // namespace gearshift::runtime
