# gradient accumulation: A micro-steps (forward+backward) then one optimizer update; S optimizer steps.
# args: A S [cut]  cut=1 drops the first micro-step of the first step and the last micro-step+update at the end
import lib, sys
A = int(sys.argv[1]); S = int(sys.argv[2]); cut = len(sys.argv) > 3 and sys.argv[3] == '1'
d = lib.load(); st = lib.steps(d)
seq = []
for k in range(S):
    s = lib.with_gaps(st[k % 3])
    fb, opt = s[:974], s[974:]
    for a in range(A): seq += lib.with_gaps([])  or fb
    seq += opt
if cut:
    seq = seq[500:len(seq) - 600]
d2 = lib.fix_corr(lib.build(d, [seq]))
d2['meta']['s_per_iter'] *= A; d2['meta']['J_per_iter'] *= A
name = f'v/accum_A{A}_S{S}{"_cut" if cut else ""}.json.gz'
lib.save(d2, name); print(name, len(seq))
