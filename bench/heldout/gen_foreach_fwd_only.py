# FSDP2 with reshard_after_forward=False: the all-gather copy-in (torch._foreach_copy_ -> multi_tensor_apply_kernel
# <TensorListMetadata<2>, CopyFunctor>) runs once per transformer layer in the FORWARD only. SRC: gpt2 or gpt3xl.
import lib, sys
src = sys.argv[1] if len(sys.argv) > 1 else 'gpt2'
d = lib.load(lib.SRC2 if src == 'gpt2' else lib.SRCXL); st = lib.steps(d)
CP = ('void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, '
      'at::native::(anonymous namespace)::CopyFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, 2, 1, 1>, '
      'at::native::(anonymous namespace)::Copy<c10::BFloat16, c10::BFloat16> >(at::native::(anonymous namespace)::TensorListMetadata<2>, '
      'at::native::(anonymous namespace)::CopyFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, 2, 1, 1>, at::native::(anonymous namespace)::Copy<c10::BFloat16, c10::BFloat16>)')
out = []
for s in st:
    s = lib.with_gaps(s); new = []
    # forward layer start: each ln_1 (first of each pair of layer_norm forward kernels) before the loss
    loss = next(i for i, e in enumerate(s) if 'SoftMaxForward' in e['name'])
    ln = [i for i, e in enumerate(s[:loss]) if 'vectorized_layer_norm_kernel' in e['name']]
    starts = set(ln[0:-1:2])          # ln_1 of every layer (last one is ln_f)
    for i, e in enumerate(s):
        if i in starts: new.append(lib.newk(CP, 18.0, e))
        new.append(e)
    out.append(new)
g = lib.fix_corr(lib.build(d, out, inter_gap=2.0)); g.pop('meta')
lib.save(g, f'v/foreach_fwd_only_{src}.json.gz'); print([len(x) for x in out], len(starts))
