# FSDP2-like: torch._foreach_copy_ (multi_tensor_apply_kernel<TensorListMetadata<2>, CopyFunctor>) once per
# transformer layer in forward (all-gather copy-in) and once per layer in backward (reduce-scatter copy-out).
# True step: the 983-op GPT-2 step (+24 copies), 3 steps, one fused AdamW update per step.
import lib, sys
N = int(sys.argv[1]) if len(sys.argv)>1 else 3
d = lib.load(); st = lib.steps(d)
CP = ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, '
      'at::native::(anonymous namespace)::CopyFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, 2, 1, 1>, '
      'at::native::(anonymous namespace)::Copy<c10::BFloat16, c10::BFloat16> >(at::native::(anonymous namespace)::TensorListMetadata<2>, '
      'at::native::(anonymous namespace)::CopyFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, 2, 1, 1>, at::native::(anonymous namespace)::Copy<c10::BFloat16, c10::BFloat16>)')
out = []
for k in range(N):
    s = lib.with_gaps(st[k % 3]); new = []
    lngrad = 0
    for i, e in enumerate(s):
        if i < 331 and i >= 6 and (i - 6) % 27 == 0:       # forward layer start (ln_1)
            new.append(lib.newk(CP, 18.0, e))
        new.append(e)
        if 'layer_norm_grad_input' in e['name']:
            lngrad += 1
            if lngrad >= 3 and lngrad % 2 == 1:            # after each layer's ln_1 backward
                new.append(lib.newk(CP, 18.0, e))
    out.append(new)
d2 = lib.fix_corr(lib.build(d, out, inter_gap=2.0))
print([len(x) for x in out])
lib.save(d2, f'v/foreach_per_layer_{N}steps.json.gz')
