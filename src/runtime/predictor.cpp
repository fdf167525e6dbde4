#include "runtime/predictor.hpp"

#include <algorithm>
#include <stdexcept>

namespace gearshift::runtime {

const char* to_string(PredictorState s) { return s == PredictorState::locked ? "locked" : "searching"; }

PositionPredictor::PositionPredictor(const std::vector<std::string>& names, PredictorOptions options,
                                     const std::vector<VariantBlock>& variants)
    : o_(options), n_(names.size()) {
  if (names.empty()) throw std::invalid_argument("position predictor: empty template");
  const auto n = static_cast<std::int64_t>(n_);
  for (const auto& v : variants)
    if (v.after < -1 || v.after >= n || v.after + static_cast<std::int64_t>(v.skip) >= n ||
        (v.names.empty() && v.skip == 0))
      throw std::invalid_argument(
          "position predictor: a variant outside the template, or one that neither inserts nor skips");
  auto push = [&](const std::string& name, std::size_t reports, bool inserted) {
    auto [it, fresh] = ids_.try_emplace(name, static_cast<std::int32_t>(ids_.size()));
    (void)fresh;
    seq_.push_back(it->second);
    tmpl_of_.push_back(reports);
    inserted_.push_back(inserted);
    jumps_.emplace_back();
  };
  // The template, each insertion after the position it follows (one before the first goes after the last: the
  // launches between two steps). An alternative's ops come before the positions they replace: the walk through
  // them takes the skip over those positions, the walk past them takes the positions.
  std::vector<std::size_t> index_of(n_);
  for (std::size_t p = 0; p < n_; ++p) {
    index_of[p] = seq_.size();
    push(names[p], p, false);
    for (const auto& v : variants) {
      const auto after = static_cast<std::size_t>(v.after < 0 ? n - 1 : v.after);
      if (v.names.empty() || after != p) continue;
      const std::size_t start = seq_.size();
      for (const auto& name : v.names) push(name, p, true);
      jumps_[start].push_back(v.names.size());
    }
  }
  for (const auto& v : variants)
    if (v.skip > 0) {
      const std::size_t first = index_of[static_cast<std::size_t>(v.after + 1)];
      jumps_[first].push_back(index_of[static_cast<std::size_t>(v.after) + v.skip] + 1 - first);
    }
  where_.resize(ids_.size());
  for (std::size_t p = 0; p < seq_.size(); ++p) where_[static_cast<std::size_t>(seq_[p])].push_back(p);
  class_.resize(ids_.size());  // (ids of inserted names too)
  for (const auto& [name, id] : ids_) class_[static_cast<std::size_t>(id)] = model::classify(trace::OpKind::kernel, name);
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

std::size_t PositionPredictor::index(std::int64_t abs) const {
  const auto m = static_cast<std::int64_t>(seq_.size());
  return static_cast<std::size_t>(((abs % m) + m) % m);
}

std::int32_t PositionPredictor::at(std::int64_t abs) const { return seq_[index(abs)]; }

Alignment PositionPredictor::report(std::int64_t abs, bool matched, bool substituted, bool expected) const {
  const auto m = static_cast<std::int64_t>(seq_.size());
  const std::int64_t step = abs >= 0 ? abs / m : -((-abs + m - 1) / m);
  const std::size_t i = index(abs);
  return {PredictorState::locked, step * static_cast<std::int64_t>(n_) + static_cast<std::int64_t>(tmpl_of_[i]),
          matched, substituted, inserted_[i], expected};
}

std::int64_t PositionPredictor::next_position() const {
  return state_ == PredictorState::locked ? report(last_abs_ + 1, false, false, false).position : -1;
}

bool PositionPredictor::follows(std::int64_t from, std::int64_t to) const {
  if (to == from + 1) return true;  // the common case, without walking optional spans
  std::vector<std::int64_t> at_next{from + 1};
  for (int j = 0; j <= o_.max_jumps && !at_next.empty(); ++j) {
    std::vector<std::int64_t> further;
    for (std::int64_t q : at_next) {
      if (q == to) return true;
      for (std::size_t len : jumps_[index(q)]) further.push_back(q + static_cast<std::int64_t>(len));
    }
    at_next.swap(further);
  }
  return false;
}

void PositionPredictor::reach(std::int64_t q, int cost, int base, int jumps, std::int32_t id) {
  const int step = std::max(1, o_.skip_cost);
  for (int d = 0; cost + d * step - base <= o_.beam; ++d) {
    const std::int64_t pos = q + d;
    const int c = cost + d * o_.skip_cost;
    if (at(pos) == id) {
      next_.push_back({pos, c, 0, Step::match});
      return;  // a farther match of the same name only costs more
    }
    if (jumps < o_.max_jumps)
      for (std::size_t len : jumps_[index(pos)]) reach(pos + static_cast<std::int64_t>(len), c, base, jumps + 1, id);
  }
}

Alignment PositionPredictor::observe(std::int32_t id, std::optional<model::KernelClass> cls) {
  hist_.push_back(id);
  if (hist_.size() > o_.history) hist_.pop_front();
  if (state_ == PredictorState::searching) return search();

  next_.clear();
  for (const Hyp& h : hyps_) {
    next_.push_back({h.abs, h.cost + o_.insert_cost, h.miss_run + 1, Step::insert});
    const std::int32_t following = at(h.abs + 1);
    if (cls && following != id && class_[static_cast<std::size_t>(following)] == *cls)
      next_.push_back({h.abs + 1, h.cost + o_.substitute_cost, h.miss_run + 1, Step::substitute});
    if (id >= 0) reach(h.abs + 1, h.cost, h.cost, 0, id);
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
  const bool took = b.step != Step::insert;
  const bool expected = took && follows(last_abs_, b.abs);
  last_abs_ = b.abs;
  return report(b.abs, b.step == Step::match, b.step == Step::substitute, expected);
}

// Candidates are template positions of the last launch; walk back through the history and keep those whose
// preceding template names agree. Lock when exactly one survives with enough context.
Alignment PositionPredictor::search() {
  ++since_lost_;
  const std::int32_t id = hist_.back();
  if (id < 0) return {};
  std::vector<std::size_t> cand = where_[static_cast<std::size_t>(id)];
  const auto n = static_cast<std::int64_t>(seq_.size());  // (the sequence's length here)
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
  return report(abs, true, false, false);
}

}  // namespace gearshift::runtime
