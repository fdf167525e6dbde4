#include "pipeline/plan_formats.hpp"

#include <cctype>
#include <cmath>
#include <set>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "pipeline/error.hpp"
#include "pipeline/merak_order.hpp"

namespace gearshift::pipeline {

const char* plan_format_name(PlanFormat f) {
  switch (f) {
    case PlanFormat::kGearshiftSchedules: return "gearshift schedules.json";
    case PlanFormat::kLowtimeFreqs: return "lowtime freqs";
    case PlanFormat::kPerseusSched: return "Perseus sched.json";
  }
  return "?";
}

namespace {

using nlohmann::json;

constexpr const char* kExpected =
    "expected gearshift's schedules.json ({\"plans\": [...]}), a lowtime freqs_pipeline_*.py "
    "([[('forward', MHz), ...], ...]) or a Perseus sched.json ([{\"rank\": r, \"power_states\": [MHz, ...]}])";

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw PipelineError(source + ": " + what);
}

std::string shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

// A clock [MHz] as a positive integer that fits an int; `where` names it.
int clock_of(const json& v, const std::string& source, const std::string& where) {
  if (v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                v.get<double>() == std::floor(v.get<double>()))) {
    const double x = v.get<double>();
    if (x > 0 && x < 1e6) return static_cast<int>(x);
  }
  fail(source, fmt::format("{} is {}, not a clock in MHz", where, shown(v)));
}

// ---- gearshift schedules.json ----

Instruction instruction_of(const std::string& s, const std::string& source, const std::string& where) {
  if (s == "forward") return Instruction::kForward;
  if (s == "backward") return Instruction::kBackward;
  if (s == "recompute") return Instruction::kRecompute;
  fail(source, fmt::format("{}: instruction '{}' (forward, backward or recompute)", where, s));
}

const json& field(const json& obj, const char* key, const std::string& source, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) fail(source, fmt::format("{}: no '{}'", where, key));
  return obj.at(key);
}

int int_field(const json& obj, const char* key, const std::string& source, const std::string& where) {
  const json& v = field(obj, key, source, where);
  if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 1 << 30)
    fail(source, fmt::format("{}: '{}' is {}, not a non-negative integer", where, key, shown(v)));
  return v.get<int>();
}

double number_field(const json& obj, const char* key, const std::string& source, const std::string& where) {
  const json& v = field(obj, key, source, where);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    fail(source, fmt::format("{}: '{}' is {}, not a non-negative number", where, key, shown(v)));
  return v.get<double>();
}

PlanFile read_gearshift(const json& j, const std::string& source) {
  PlanFile f;
  f.format = PlanFormat::kGearshiftSchedules;
  const std::string top = "schedules.json";
  f.stages = int_field(j, "stages", source, top);
  f.microbatches = int_field(j, "microbatches", source, top);
  if (j.contains("virtual_stages")) f.virtual_stages = int_field(j, "virtual_stages", source, top);
  if (j.contains("schedule") && j["schedule"].is_string()) f.schedule = j["schedule"].get<std::string>();
  if (j.contains("time_unit_s")) f.time_unit_s = number_field(j, "time_unit_s", source, top);
  if (j.contains("blocking_power_w")) f.blocking_power_w = number_field(j, "blocking_power_w", source, top);
  if (j.contains("cost_model") && j["cost_model"].is_string()) f.cost_model = j["cost_model"].get<std::string>();
  const json& plans = j.at("plans");
  if (!plans.is_array() || plans.empty()) fail(source, "'plans' is not a non-empty array");
  for (std::size_t p = 0; p < plans.size(); ++p) {
    const std::string pw = fmt::format("plans[{}]", p);
    ClockSchedule s;
    s.source = source;
    const json& name = field(plans[p], "name", source, pw);
    s.name = name.is_string() ? name.get<std::string>() : pw;
    const json& ranks = field(plans[p], "ranks", source, pw);
    if (!ranks.is_array()) fail(source, pw + ": 'ranks' is not an array");
    s.ranks.resize(static_cast<std::size_t>(f.stages));
    std::set<int> seen;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const std::string rw = fmt::format("{}.ranks[{}]", pw, r);
      const int rank = int_field(ranks[r], "rank", source, rw);
      if (rank >= f.stages)
        fail(source, fmt::format("{}: unknown rank {} (the plan has {} stages: ranks 0..{})", rw, rank, f.stages,
                                 f.stages - 1));
      if (!seen.insert(rank).second) fail(source, fmt::format("{}: rank {} appears twice", rw, rank));
      const json& ins = field(ranks[r], "instructions", source, rw);
      if (!ins.is_array()) fail(source, rw + ": 'instructions' is not an array");
      for (std::size_t i = 0; i < ins.size(); ++i) {
        const std::string iw = fmt::format("{} rank {} instructions[{}]", s.name, rank, i);
        PlanStep st;
        st.where = source + ": " + iw;
        const json& kind = field(ins[i], "instruction", source, iw);
        if (!kind.is_string()) fail(source, fmt::format("{}: 'instruction' is {}", iw, shown(kind)));
        st.instruction = instruction_of(kind.get<std::string>(), source, iw);
        st.microbatch = int_field(ins[i], "microbatch", source, iw);
        if (ins[i].contains("chunk")) st.chunk = int_field(ins[i], "chunk", source, iw);
        st.duration_s = number_field(ins[i], "duration_s", source, iw);
        st.clock_mhz = clock_of(field(ins[i], "sm_clock_mhz", source, iw), source, iw + " 'sm_clock_mhz'");
        s.ranks[static_cast<std::size_t>(rank)].push_back(std::move(st));
      }
    }
    if (static_cast<int>(seen.size()) != f.stages)
      fail(source, fmt::format("{}: {} of {} ranks listed", pw, seen.size(), f.stages));
    f.plans.push_back(std::move(s));
  }
  return f;
}

// ---- Perseus sched.json ----

PlanFile read_perseus(const json& j, const std::string& source) {
  PlanFile f;
  f.format = PlanFormat::kPerseusSched;
  f.schedule = "1f1b";
  const int S = static_cast<int>(j.size());
  f.stages = S;
  std::vector<const json*> by_rank(static_cast<std::size_t>(S), nullptr);
  for (std::size_t e = 0; e < j.size(); ++e) {
    const std::string ew = fmt::format("entry {}", e);
    const json& rv = field(j[e], "rank", source, ew);
    if (!rv.is_number_integer())
      fail(source, fmt::format("{}: 'rank' is {}, not an integer", ew, shown(rv)));
    const long long rank = rv.get<long long>();
    if (rank < 0 || rank >= S)
      fail(source, fmt::format("{}: unknown rank {} (the plan has {} entries: ranks 0..{})", ew, rank, S, S - 1));
    if (by_rank[static_cast<std::size_t>(rank)]) fail(source, fmt::format("{}: rank {} appears twice", ew, rank));
    const json& ps = field(j[e], "power_states", source, ew);
    if (!ps.is_array()) fail(source, fmt::format("rank {}: 'power_states' is not an array", rank));
    by_rank[static_cast<std::size_t>(rank)] = &ps;
  }
  const std::size_t len0 = by_rank[0]->size();
  const auto M = merak_microbatches_for_length(S, 0, len0);
  if (!M)
    fail(source, fmt::format("rank 0: {} power states fit no microbatch count of Merak's 1F1B order for {} stages "
                             "({} for 1 microbatch, 4 more per microbatch)",
                             len0, S, merak_1f1b_stream(S, 1, 0).size()));
  f.microbatches = *M;
  ClockSchedule s;
  s.name = "plan";
  s.source = source;
  s.ranks.resize(static_cast<std::size_t>(S));
  for (int r = 0; r < S; ++r) {
    const json& ps = *by_rank[static_cast<std::size_t>(r)];
    const auto stream = merak_1f1b_stream(S, *M, r);
    if (ps.size() != stream.size())
      fail(source, fmt::format("rank {}: {} power states; Merak's 1F1B order for {} stages x {} microbatches (from "
                               "rank 0's {}) has {} on rank {}",
                               r, ps.size(), S, *M, len0, stream.size(), r));
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const std::string where = fmt::format("rank {} power_states[{}]", r, i);
      const int mhz = clock_of(ps[i], source, where);  // every entry is checked, computations or not
      const auto c = stream[i].command;
      if (c != MerakCommand::kForwardPass && c != MerakCommand::kBackwardPass) continue;
      PlanStep st;
      st.instruction = c == MerakCommand::kForwardPass ? Instruction::kForward : Instruction::kBackward;
      st.microbatch = stream[i].microbatch;
      st.clock_mhz = mhz;
      st.where = fmt::format("{}: {} ({})", source, where, merak_command_name(c));
      s.ranks[static_cast<std::size_t>(r)].push_back(std::move(st));
    }
  }
  f.plans.push_back(std::move(s));
  return f;
}

// ---- lowtime freqs_pipeline_*.py: a Python literal of lists, tuples, strings and integers ----

struct Literal {
  enum Kind { kInt, kStr, kSeq } kind = kInt;
  long long i = 0;
  std::string s;
  std::vector<Literal> items;
  std::size_t at = 0;  // byte offset, for messages
};

class LiteralParser {
 public:
  LiteralParser(const std::string& t, const std::string& source) : t_(t), source_(source) {}

  Literal parse_top() {
    Literal v = value();
    skip();
    if (p_ != t_.size()) error("text after the closing ']'");
    return v;
  }

 private:
  void skip() {
    while (p_ < t_.size()) {
      if (std::isspace(static_cast<unsigned char>(t_[p_]))) ++p_;
      else if (t_[p_] == '#') while (p_ < t_.size() && t_[p_] != '\n') ++p_;
      else break;
    }
  }
  [[noreturn]] void error(const std::string& what) {
    std::size_t line = 1;
    for (std::size_t k = 0; k < p_ && k < t_.size(); ++k) line += t_[k] == '\n';
    fail(source_, fmt::format("line {}: {} (lowtime freqs file: a list per stage of ('forward'|'backward', MHz))",
                              line, what));
  }
  Literal value() {
    skip();
    if (p_ >= t_.size()) error("unexpected end of file");
    Literal v;
    v.at = p_;
    const char c = t_[p_];
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      v.kind = Literal::kSeq;
      ++p_;
      for (;;) {
        skip();
        if (p_ < t_.size() && t_[p_] == close) { ++p_; break; }
        v.items.push_back(value());
        skip();
        if (p_ < t_.size() && t_[p_] == ',') { ++p_; continue; }
        if (p_ < t_.size() && t_[p_] == close) { ++p_; break; }
        error(fmt::format("expected ',' or '{}'", close));
      }
      return v;
    }
    if (c == '\'' || c == '"') {
      v.kind = Literal::kStr;
      const std::size_t end = t_.find(c, p_ + 1);
      if (end == std::string::npos) error("unterminated string");
      v.s = t_.substr(p_ + 1, end - p_ - 1);
      p_ = end + 1;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-') {
      std::size_t q = p_ + 1;
      while (q < t_.size() && std::isdigit(static_cast<unsigned char>(t_[q]))) ++q;
      if (q < t_.size() && (t_[q] == '.' || std::isalpha(static_cast<unsigned char>(t_[q])))) {
        while (q < t_.size() && (t_[q] == '.' || std::isalnum(static_cast<unsigned char>(t_[q])))) ++q;
        error(fmt::format("'{}' is not a clock in MHz (whole MHz expected)", t_.substr(v.at, q - v.at)));
      }
      const std::string digits = t_.substr(p_, q - p_);
      if (digits == "-" || digits.size() > 9) error(fmt::format("'{}' is not a clock in MHz", digits));
      v.i = std::stoll(digits);
      p_ = q;
      return v;
    }
    std::size_t q = p_;
    while (q < t_.size() && !std::isspace(static_cast<unsigned char>(t_[q])) && t_[q] != ',' && t_[q] != ')' &&
           t_[q] != ']')
      ++q;
    error(fmt::format("'{}' is not a clock in MHz", t_.substr(p_, q - p_)));
  }

  const std::string& t_;
  const std::string& source_;
  std::size_t p_ = 0;
};

PlanFile read_lowtime(const std::string& text, const std::string& source) {
  const Literal top = LiteralParser(text, source).parse_top();
  if (top.kind != Literal::kSeq || top.items.empty())
    fail(source, std::string("not a plan: ") + kExpected);
  PlanFile f;
  f.format = PlanFormat::kLowtimeFreqs;
  f.schedule = "1f1b";
  f.stages = static_cast<int>(top.items.size());
  ClockSchedule s;
  s.name = "plan";
  s.source = source;
  bool tuples = false;
  for (std::size_t r = 0; r < top.items.size(); ++r) {
    const Literal& stage = top.items[r];
    if (stage.kind != Literal::kSeq) fail(source, fmt::format("stage {}: not a list of clocks", r));
    std::vector<PlanStep> steps;
    for (std::size_t i = 0; i < stage.items.size(); ++i) {
      const Literal& x = stage.items[i];
      PlanStep st;
      st.where = fmt::format("{}: stage {} item {}", source, r, i);
      const Literal* clock = &x;
      if (x.kind == Literal::kSeq) {
        if (x.items.size() != 2 || x.items[0].kind != Literal::kStr)
          fail(source, fmt::format("stage {} item {}: expected ('forward'|'backward', MHz)", r, i));
        st.instruction = instruction_of(x.items[0].s, source, fmt::format("stage {} item {}", r, i));
        clock = &x.items[1];
        tuples = true;
      }
      if (clock->kind != Literal::kInt || clock->i <= 0 || clock->i >= 1000000)
        fail(source, fmt::format("stage {} item {}: {} is not a clock in MHz", r, i,
                                 clock->kind == Literal::kStr ? "'" + clock->s + "'" : std::to_string(clock->i)));
      st.clock_mhz = static_cast<int>(clock->i);
      steps.push_back(std::move(st));
    }
    s.ranks.push_back(std::move(steps));
  }
  if (tuples) {
    int fwd = 0;
    for (const auto& st : s.ranks[0]) fwd += st.instruction == Instruction::kForward;
    f.microbatches = fwd;
  }
  f.plans.push_back(std::move(s));
  return f;
}

}  // namespace

PlanFile parse_plan_file(const std::string& text, const std::string& source) {
  std::size_t p = 0;
  while (p < text.size() && std::isspace(static_cast<unsigned char>(text[p]))) ++p;
  if (p == text.size()) fail(source, std::string("empty file; ") + kExpected);
  if (text[p] == '{') {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) fail(source, std::string("not valid JSON; ") + kExpected);
    if (!j.contains("plans")) fail(source, std::string("a JSON object without 'plans'; ") + kExpected);
    return read_gearshift(j, source);
  }
  if (text[p] == '[') {
    json j = json::parse(text, nullptr, false);
    if (!j.is_discarded() && j.is_array() && !j.empty() && j[0].is_object()) return read_perseus(j, source);
    if (!j.is_discarded() && j.is_array() && j.empty()) fail(source, std::string("an empty list; ") + kExpected);
    return read_lowtime(text, source);  // Python literal (tuples, trailing commas, # comments) or lists of MHz
  }
  fail(source, std::string("not a plan; ") + kExpected);
}

}  // namespace gearshift::pipeline
