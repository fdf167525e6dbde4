# activation (gradient) checkpointing: each transformer layer's forward (27 ops) is recomputed right before that
# layer's backward. True step = forward + (recompute + backward) x 12 + optimizer. 3 steps, meta scaled by the added time.
import lib, copy
d = lib.load(); st = [lib.with_gaps(s) for s in lib.steps(d)]
out = []
for s in st:
    fwd_layers = [s[6 + 27 * j: 6 + 27 * (j + 1)] for j in range(12)]
    new = []; lngrad = 0; j = 11
    for i, e in enumerate(s):
        if 'layer_norm_grad_input' in e['name']:
            lngrad += 1
        # before each layer's backward: the layer backward begins after ln_f grad (1st) and after each ln_1 grad (odd >=3)
        new.append(e)
        if 'GammaBetaBackward' in e['name'] and (lngrad == 1 or (lngrad >= 3 and lngrad % 2 == 1)) and j >= 0:
            new += copy.deepcopy(fwd_layers[j]); j -= 1
    out.append(new)
g = lib.fix_corr(lib.build(d, out, inter_gap=2.0))
extra = sum(e['dur'] + e['_gap'] for L in [st[0][6:330]] for e in L) / 1e6
g['meta']['s_per_iter'] += extra; g['meta']['J_per_iter'] = g['meta']['s_per_iter'] * g['meta']['avg_W']
lib.save(g, 'v/checkpointing.json.gz'); print([len(x) for x in out])
g.pop('meta'); lib.save(g, 'v/checkpointing_nometa.json.gz')
