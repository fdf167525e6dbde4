# every other step differs: even steps additionally compute a grad-norm for logging (foreach norm + 12 reduce kernels)
# before the optimizer (like `if step % 2 == 0: log(grad_norm)`); 6 steps. Also every 3rd step variant (9 steps).
import lib, copy, sys
K = int(sys.argv[1]) if len(sys.argv) > 1 else 2
N = int(sys.argv[2]) if len(sys.argv) > 2 else 6
d = lib.load(); st = [lib.with_gaps(s) for s in lib.steps(d)]
red = [e for e in st[0] if 'reduce_kernel' in e['name']][0]
fill = [e for e in st[0] if 'FillFunctor' in e['name']][0]
out = []
for k in range(N):
    s = copy.deepcopy(st[k % 3])
    if k % K == 0:
        extra = [lib.newk(red['name'], 12.0, red) for _ in range(12)] + [lib.newk(fill['name'], 1.0, fill)]
        extra += [lib.newk('void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::NormTwoOps<float, float, float>, unsigned int, float, 4>)', 8.0, red) for _ in range(8)]
        s = s[:974] + extra + s[974:]
    out.append(s)
g = lib.fix_corr(lib.build(d, out, inter_gap=2.0)); g.pop('meta')
lib.save(g, f'v/alt_every{K}_{N}steps.json.gz'); print([len(x) for x in out])
