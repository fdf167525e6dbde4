#include "pipeline/exp_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipeline/error.hpp"

namespace gearshift::pipeline {

double ExpFit::operator()(double x) const { return a0 * std::exp(b * (x - x0)) + c; }
double ExpFit::a() const { return a0 * std::exp(-b * x0); }

namespace {

// Best (a0, c) for a fixed b, with the MSE.
ExpFit solve_linear(const std::vector<double>& x, const std::vector<double>& y, double x0, double b) {
  const auto n = static_cast<double>(x.size());
  double zbar = 0, ybar = 0;
  std::vector<double> z(x.size());
  for (std::size_t k = 0; k < x.size(); ++k) {
    z[k] = std::exp(b * (x[k] - x0));
    zbar += z[k];
    ybar += y[k];
  }
  zbar /= n;
  ybar /= n;
  double szz = 0, szy = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    szz += (z[k] - zbar) * (z[k] - zbar);
    szy += (z[k] - zbar) * (y[k] - ybar);
  }
  ExpFit f;
  f.x0 = x0;
  f.b = b;
  f.a0 = szz > 0 ? std::max(0.0, szy / szz) : 0.0;
  f.c = ybar - f.a0 * zbar;
  double sse = 0;
  for (std::size_t k = 0; k < x.size(); ++k) {
    double r = f.a0 * z[k] + f.c - y[k];
    sse += r * r;
  }
  f.mse = sse / n;
  return f;
}

}  // namespace

ExpFit fit_exponential(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) throw PipelineError("exponential fit needs at least two points");
  const double x0 = *std::min_element(x.begin(), x.end());
  if (*std::max_element(x.begin(), x.end()) == x0) throw PipelineError("exponential fit needs two distinct times");
  // Search s = log|b|.
  const double s_lo = std::log(1e-6), s_hi = std::log(5.0);
  const int grid = 400;
  auto mse_at = [&](double s) { return solve_linear(x, y, x0, -std::exp(s)).mse; };
  int best = 0;
  double best_mse = std::numeric_limits<double>::infinity();
  for (int i = 0; i <= grid; ++i) {
    double m = mse_at(s_lo + (s_hi - s_lo) * i / grid);
    if (m < best_mse) {
      best_mse = m;
      best = i;
    }
  }
  double lo = s_lo + (s_hi - s_lo) * std::max(0, best - 1) / grid;
  double hi = s_lo + (s_hi - s_lo) * std::min(grid, best + 1) / grid;
  const double g = (std::sqrt(5.0) - 1) / 2;
  double p = hi - g * (hi - lo), q = lo + g * (hi - lo);
  double fp = mse_at(p), fq = mse_at(q);
  for (int it = 0; it < 200 && hi - lo > 1e-15; ++it) {
    if (fp <= fq) {
      hi = q;
      q = p;
      fq = fp;
      p = hi - g * (hi - lo);
      fp = mse_at(p);
    } else {
      lo = p;
      p = q;
      fp = fq;
      q = lo + g * (hi - lo);
      fq = mse_at(q);
    }
  }
  return solve_linear(x, y, x0, -std::exp(fp <= fq ? p : q));
}

}  // namespace gearshift::pipeline
