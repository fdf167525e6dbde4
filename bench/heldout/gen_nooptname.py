# torch.compile'd optimizer: the AdamW update runs as Triton kernels whose names carry no "adam"/"multi_tensor"
# (triton_for_fused_...); no ProfilerStep markers. Expect: refusal (nothing but the period says it is the step).
# variant 'layermarkers': + launch events + ProfilerStep#N markers that cover ONE LAYER each (misplaced prof.step())
import lib, copy, sys
d = lib.load()
for i, e in enumerate(lib.ops(d)):
    if 'multi_tensor_apply' in e['name']: e['name'] = 'triton_for_fused__foreach_addcdiv_add_div_lerp_mul_sqrt_%d' % (i % 9)
d.pop('meta')
lib.save(d, 'v/compiled_opt.json.gz')
L = lib.add_launches(d)
lib.add_markers(d, L, [k*983 + 6 + 27*j for k in range(3) for j in range(12)])
lib.save(d, 'v/compiled_opt_layermarkers.json.gz')
