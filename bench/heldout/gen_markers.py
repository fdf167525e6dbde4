# GPT-2 steps with Kineto launch events (cudaLaunchKernel, correlation ids) and ProfilerStep#N markers.
# mode: true  -> one marker per training step (truth)
#       micro -> gradient accumulation 4x, prof.step() called per micro-batch (marker per micro-step)
#       half  -> 2 markers per training step (forward | backward+optimizer)
#       double-> one marker per 2 training steps (6 steps)
#       layer -> markers cut every transformer layer of the forward (lying)
import lib, sys
mode = sys.argv[1]
d = lib.load(); st = lib.steps(d)
if mode == 'micro':
    seq = []
    for k in range(3):
        s = lib.with_gaps(st[k]); fb, opt = s[:974], s[974:]
        for a in range(4): seq += fb
        seq += opt
    d = lib.fix_corr(lib.build(d, [seq])); d['meta']['s_per_iter'] *= 4; d['meta']['J_per_iter'] *= 4
elif mode == 'double':
    d = lib.fix_corr(lib.build(d, [lib.with_gaps(st[k % 3]) for k in range(6)], inter_gap=2.0))
    d['meta']['s_per_iter'] *= 2; d['meta']['J_per_iter'] *= 2
L = lib.add_launches(d)
n = len(L)
if mode == 'true':   starts = [0, 983, 1966]
elif mode == 'micro': starts = [i for i in range(n) if i == 0 or L[i][0]['name'].startswith('void at::native::vectorized_gather_kernel<16') and L[i-1][0]['cat']!='kernel' or False]
elif mode == 'half': starts = [k*983 + o for k in range(3) for o in (0, 331)]
elif mode == 'double': starts = [0, 1966, 3932]
elif mode == 'layer': starts = [k*983 + 6 + 27*j for k in range(3) for j in range(12)]
if mode == 'micro':
    # a micro-step starts with the gather kernel that follows the previous micro-step's last op
    starts = [0]
    for i in range(1, n):
        if L[i][0]['name'] == L[0][0]['name'] and L[i][0]['dur'] > 5 and L[i+3][0]['name'] == L[3][0]['name']: starts.append(i)
print(mode, len(starts), starts[:8])
lib.add_markers(d, L, starts)
lib.save(d, f'v/markers_{mode}.json.gz')
