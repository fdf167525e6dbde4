// Least-squares fit of f(x) = a·exp(b·x) + c with a ≥ 0, b < 0 (convex, decreasing).
//
// This is the per-instruction cost model of Perseus (Chung et al., SOSP'24; data README §3.1 step 5), there
// fitted with SciPy's Levenberg–Marquardt from a grid of starts. We use the equivalent separable form: for a
// fixed b the optimal (a, c) solve a 2-variable linear least-squares problem in closed form (a clamped at 0),
// so only b is searched: a log-spaced grid over |b| ∈ [1e-6, 5] per x-unit, then golden-section refinement.
// |b| is capped at 1e-6 (an essentially linear fit), as the README's re-derivation did.
#pragma once

#include <vector>

namespace gearshift::pipeline {

struct ExpFit {
  // f(x) = a0·exp(b·(x − x0)) + c; a0 = a·exp(b·x0) is kept for numerical stability.
  double x0 = 0, a0 = 0, b = 0, c = 0;
  double mse = 0;  // mean squared residual [unit of y, squared]
  double operator()(double x) const;
  double a() const;  // the coefficient of exp(b·x) in the uncentred form
};

// Requires x.size() == y.size() ≥ 2 and at least two distinct x.
ExpFit fit_exponential(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace gearshift::pipeline
