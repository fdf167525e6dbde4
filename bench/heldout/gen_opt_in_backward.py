# optimizer in backward (torch register_post_accumulate_grad_hook / DeepSpeed-style per-layer step):
# the fused AdamW kernel runs once per transformer layer right after that layer's backward; no update at the step end.
# True step: one forward+backward (3 steps). meta removed (a plain Kineto trace has none).
import lib
d = lib.load(); st = lib.steps(d)
out = []
for k in range(3):
    s = lib.with_gaps(st[k]); body, opt = s[:974], s[974:]
    adam = opt[2]                       # FusedAdamMathFunctor multi_tensor_apply kernel
    new = []; lngrad = 0
    for e in body:
        new.append(e)
        if 'layer_norm_grad_input' in e['name']:
            lngrad += 1
            if lngrad >= 3 and lngrad % 2 == 1:
                a = lib.newk(adam['name'], 30.0, adam); new.append(a)
    new.append(lib.newk(adam['name'], 30.0, adam))  # embeddings' update at the end
    out.append(new)
d2 = lib.fix_corr(lib.build(d, out, inter_gap=2.0)); d2.pop('meta')
lib.save(d2, 'v/opt_in_backward.json.gz'); print([len(x) for x in out])
