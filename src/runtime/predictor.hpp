// Position predictor: follows the live launch stream against the iteration template.
//
// Locked, it keeps a small beam of alignment hypotheses (template position, cost) and advances them with each
// launch: a launch matching a position d ahead costs (d-1) skips, a launch matching nothing near costs one
// insertion; the cheapest hypothesis is the answer. This absorbs inserted, missing and swapped kernels without
// losing lock. After `lost_after` unmatched launches in a row it falls back to searching: it looks for the
// position whose preceding template names match the recent launches uniquely and locks there.
// Not thread-safe: one thread (the runtime thread, or replay) drives it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gearshift::runtime {

enum class PredictorState { searching, locked };
const char* to_string(PredictorState s);

struct PredictorOptions {
  int insert_cost = 2;          // cost of a launch that matches no template position near
  int skip_cost = 1;            // cost per template position skipped (a missing kernel)
  int beam = 4;                 // keep hypotheses within this cost of the best
  std::size_t max_hypotheses = 32;
  int lost_after = 12;          // unmatched launches in a row before the lock is dropped
  std::size_t min_context = 3;  // launches that must agree before (re)locking
  std::size_t history = 4096;   // launches remembered for resynchronisation
};

struct Alignment {
  PredictorState state = PredictorState::searching;
  std::int64_t position = -1;  // absolute position (step × size + template index); -1 while searching
  bool matched = false;        // the launch matched the template at `position`
};

class PositionPredictor {
 public:
  explicit PositionPredictor(const std::vector<std::string>& template_names, PredictorOptions options = {});

  // Template id of a kernel name, -1 when the template lacks it. Interning once per name keeps observe cheap.
  std::int32_t id_of(std::string_view name) const;
  Alignment observe(std::int32_t id);
  Alignment observe(std::string_view name) { return observe(id_of(name)); }

  PredictorState state() const { return state_; }
  // Absolute position expected for the next launch; -1 while searching.
  std::int64_t next_position() const;
  std::size_t size() const { return seq_.size(); }
  std::uint64_t relocks() const { return relocks_; }  // times it locked (first lock included)
  std::uint64_t losses() const { return losses_; }    // times it lost lock

 private:
  struct Hyp {
    std::int64_t abs;
    int cost;
    int miss_run;
  };
  Alignment search();
  std::int32_t at(std::int64_t abs) const;

  PredictorOptions o_;
  std::vector<std::int32_t> seq_;                       // template ids
  std::vector<std::vector<std::size_t>> where_;         // id -> template positions
  std::unordered_map<std::string, std::int32_t> ids_;
  std::deque<std::int32_t> hist_;
  std::vector<Hyp> hyps_, next_;
  PredictorState state_ = PredictorState::searching;
  std::int64_t last_abs_ = -1;       // last reported absolute position
  std::uint64_t since_lost_ = 0;     // launches while searching
  std::uint64_t relocks_ = 0, losses_ = 0;
};

}  // namespace gearshift::runtime
