# CUDA graph variants of the GPT-2 trace (Kineto: all ops of one cudaGraphLaunch carry the launch's correlation id)
#  graph_step: each step's forward+backward is one graph launch (torch.compile reduce-overhead), optimizer eager
#  corr_zero:  every op has correlation 0 (an exporter that writes no correlation)
#  corr_missing: no 'correlation' key at all
import lib, copy
d = lib.load(); st = lib.steps(d)
g = copy.deepcopy(d); k = 0
for e in lib.ops(g):
    pass
ops = lib.ops(g)
i = 0
for s in range(3):
    c = 5000000 + s
    for j in range(983):
        e = ops[i]; i += 1
        if j < 974: e['args']['correlation'] = c
lib.save(g, 'v/graph_step.json.gz')
g = copy.deepcopy(d)
for e in lib.ops(g): e['args']['correlation'] = 0
lib.save(g, 'v/corr_zero.json.gz')
g = copy.deepcopy(d)
for e in lib.ops(g): e['args'].pop('correlation')
lib.save(g, 'v/corr_missing.json.gz')
