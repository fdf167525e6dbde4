#include "runtime/predictor.hpp"

#include <algorithm>
#include <stdexcept>

namespace gearshift::runtime {

const char* to_string(PredictorState s) { return s == PredictorState::locked ? "locked" : "searching"; }

PositionPredictor::PositionPredictor(const std::vector<std::string>& names, PredictorOptions options) : o_(options) {
  if (names.empty()) throw std::invalid_argument("position predictor: empty template");
  for (const auto& n : names) {
    auto [it, fresh] = ids_.try_emplace(n, static_cast<std::int32_t>(ids_.size()));
    (void)fresh;
    seq_.push_back(it->second);
  }
  where_.resize(ids_.size());
  for (std::size_t p = 0; p < seq_.size(); ++p) where_[static_cast<std::size_t>(seq_[p])].push_back(p);
  class_.resize(ids_.size());
  for (const auto& [n, id] : ids_) class_[static_cast<std::size_t>(id)] = model::classify(trace::OpKind::kernel, n);
}

model::KernelClass PositionPredictor::class_of(std::string_view name) const {
  std::int32_t id = id_of(name);
  return id >= 0 ? class_[static_cast<std::size_t>(id)] : model::classify(trace::OpKind::kernel, name);
}

Alignment PositionPredictor::observe(std::string_view name) {
  const std::int32_t id = id_of(name);
  if (id >= 0) return observe(id, class_[static_cast<std::size_t>(id)]);
  auto it = foreign_.find(name);
  if (it == foreign_.end()) {
    if (foreign_.size() >= 4096) foreign_.clear();  // bounded: a job of ever-new names gets no substitutions cached
    it = foreign_.emplace(std::string(name), model::classify(trace::OpKind::kernel, name)).first;
  }
  return observe(id, it->second);
}

std::int32_t PositionPredictor::id_of(std::string_view name) const {
  auto it = ids_.find(name);
  return it == ids_.end() ? -1 : it->second;
}

std::int32_t PositionPredictor::at(std::int64_t abs) const {
  const auto n = static_cast<std::int64_t>(seq_.size());
  return seq_[static_cast<std::size_t>(((abs % n) + n) % n)];
}

std::int64_t PositionPredictor::next_position() const {
  return state_ == PredictorState::locked ? last_abs_ + 1 : -1;
}

Alignment PositionPredictor::observe(std::int32_t id, std::optional<model::KernelClass> cls) {
  hist_.push_back(id);
  if (hist_.size() > o_.history) hist_.pop_front();
  if (state_ == PredictorState::searching) return search();

  next_.clear();
  const int max_d = o_.beam / std::max(1, o_.skip_cost) + 1;
  for (const Hyp& h : hyps_) {
    next_.push_back({h.abs, h.cost + o_.insert_cost, h.miss_run + 1, Step::insert});
    const std::int32_t following = at(h.abs + 1);
    if (cls && following != id && class_[static_cast<std::size_t>(following)] == *cls)
      next_.push_back({h.abs + 1, h.cost + o_.substitute_cost, h.miss_run + 1, Step::substitute});
    if (id < 0) continue;
    for (int d = 1; d <= max_d; ++d) {
      if (at(h.abs + d) == id) {
        next_.push_back({h.abs + d, h.cost + (d - 1) * o_.skip_cost, 0, Step::match});
        break;  // a farther match of the same name only costs more
      }
    }
  }
  // Cheapest first; on a tie a match beats a substitution beats an insertion, then the nearer position (the
  // less it assumes missing).
  std::sort(next_.begin(), next_.end(), [](const Hyp& a, const Hyp& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.step != b.step) return a.step < b.step;
    return a.abs < b.abs;
  });
  hyps_.clear();
  const int best = next_.front().cost;
  for (const Hyp& h : next_) {
    if (h.cost > best + o_.beam || hyps_.size() >= o_.max_hypotheses) break;
    bool dup = std::any_of(hyps_.begin(), hyps_.end(), [&](const Hyp& k) { return k.abs == h.abs; });
    if (!dup) hyps_.push_back({h.abs, h.cost - best, h.miss_run, h.step});
  }
  const Hyp& b = hyps_.front();
  if (b.miss_run >= o_.lost_after) {
    state_ = PredictorState::searching;
    ++losses_;
    since_lost_ = 0;
    hyps_.clear();
    return {};
  }
  last_abs_ = b.abs;
  return {PredictorState::locked, b.abs, b.step == Step::match, b.step == Step::substitute};
}

// Candidates are template positions of the last launch; walk back through the history and keep those whose
// preceding template names agree. Lock when exactly one survives with enough context.
Alignment PositionPredictor::search() {
  ++since_lost_;
  const std::int32_t id = hist_.back();
  if (id < 0) return {};
  std::vector<std::size_t> cand = where_[static_cast<std::size_t>(id)];
  const auto n = static_cast<std::int64_t>(seq_.size());
  std::size_t depth = 1;
  std::vector<std::size_t> kept;
  while (cand.size() > 1 && depth < hist_.size() && depth < seq_.size()) {
    const std::int32_t want = hist_[hist_.size() - 1 - depth];
    kept.clear();
    for (std::size_t c : cand)
      if (at(static_cast<std::int64_t>(c) - static_cast<std::int64_t>(depth)) == want) kept.push_back(c);
    if (kept.empty()) return {};  // an inserted or missing kernel in the context: wait for more launches
    cand.swap(kept);
    ++depth;
  }
  if (cand.size() != 1) return {};
  // Unique: check the context is long enough (a lone rare name is not evidence enough).
  std::size_t agree = 1;
  while (agree < o_.min_context && agree < hist_.size() &&
         hist_[hist_.size() - 1 - agree] == at(static_cast<std::int64_t>(cand[0]) - static_cast<std::int64_t>(agree)))
    ++agree;
  if (agree < std::min(o_.min_context, hist_.size())) return {};
  // Absolute numbering continues from where the lock was lost, nearest to the launches counted since.
  std::int64_t guess = last_abs_ < 0 ? static_cast<std::int64_t>(cand[0]) : last_abs_ + static_cast<std::int64_t>(since_lost_);
  std::int64_t step = (guess - static_cast<std::int64_t>(cand[0]) + n / 2);
  step = step >= 0 ? step / n : -((-step + n - 1) / n);
  std::int64_t abs = std::max<std::int64_t>(step * n + static_cast<std::int64_t>(cand[0]), last_abs_ + 1);
  if (abs % n != static_cast<std::int64_t>(cand[0])) abs += (static_cast<std::int64_t>(cand[0]) - abs % n + n) % n;
  state_ = PredictorState::locked;
  ++relocks_;
  hyps_.assign(1, {abs, 0, 0, Step::match});
  last_abs_ = abs;
  return {PredictorState::locked, abs, true};
}

}  // namespace gearshift::runtime
