# one data-loader stall (idle GPU) of STALL µs between two training steps of an N-step GPT-2 trace.
# usage: gen_stall.py STALL_US N [markers] [meta]
#   markers: add Kineto launch events + one ProfilerStep#N marker per true step (the stall falls inside a marker)
import lib, sys
stall = float(sys.argv[1]); N = int(sys.argv[2]); opts = sys.argv[3:]
d = lib.load(); st = [lib.with_gaps(s) for s in lib.steps(d)]
gaps = [0] + [2.0] * (N - 1); gaps[N // 2] = stall
g = lib.fix_corr(lib.build(d, [st[k % 3] for k in range(N)], inter_gap=gaps))
if 'meta' not in opts: g.pop('meta')
name = f'v/stall{int(stall/1000)}ms_{N}steps' + ''.join('_' + o for o in opts)
if 'markers' in opts:
    L = lib.add_launches(g); lib.add_markers(g, L, [k * 983 for k in range(N)])
lib.save(g, name + '.json.gz'); print(name)
