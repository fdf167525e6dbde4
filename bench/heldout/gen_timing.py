# timing variants of the GPT-2 H200 trace (true step: 983 ops, 85.5 ms)
import lib, copy, sys
d = lib.load(); st = [lib.with_gaps(s) for s in lib.steps(d)]
def S(k): return copy.deepcopy(st[k % 3])
def slow(s, f):
    # warm-up: CPU-bound launches -> every idle gap grows so the step takes f x as long
    busy = sum(e['dur'] for e in s); idle = sum(e['_gap'] for e in s)
    extra = (f - 1) * (busy + idle)
    for e in s: e['_gap'] += extra / len(s)
    return s
V = {}
V['warm3x_4steps'] = ([slow(S(0), 3.0), S(1), S(2), S(0)], 2.0)
V['warm3x_3steps'] = ([slow(S(0), 3.0), S(1), S(2)], 2.0)
V['warm8x_5steps'] = ([slow(S(0), 8.0), S(1), S(2), S(0), S(1)], 2.0)
V['warm2x_two_warm_6steps'] = ([slow(S(0), 2.0), slow(S(1), 1.5), S(2), S(0), S(1), S(2)], 2.0)
V['stall2s_5steps'] = ([S(k) for k in range(5)], [0, 2.0, 2.0, 2e6, 2.0])
V['ckpt30s_6steps'] = ([S(k) for k in range(6)], [0, 2.0, 2.0, 3e7, 2.0, 2.0])
V['two_steps'] = ([S(0), S(1)], 2.0)
V['stall_every_step_5steps'] = ([S(k) for k in range(5)], 40000.0)   # dataloader-bound: 40 ms idle between steps
for name, (steps, gap) in V.items():
    lib.save(lib.build(d, steps, inter_gap=gap), f'v/t_{name}.json.gz')
# cut at both ends: last 40 % of a step, 2 whole steps, first 60 % of a step
seq = S(0)[590:] + S(1) + S(2) + S(0)[:590]
lib.save(lib.build(d, [seq]), 'v/t_cut_both_ends_2whole.json.gz')
seq = S(0)[590:] + S(1) + S(2)[:590]
lib.save(lib.build(d, [seq]), 'v/t_cut_both_ends_1whole.json.gz')
seq = S(0) + S(1)[:500]
lib.save(lib.build(d, [seq]), 'v/t_1p5_steps.json.gz')
