# torch.compile(mode="reduce-overhead")-like Kineto trace: each step's forward+backward runs as ONE cudaGraphLaunch
# (all its kernels carry the launch's correlation id and "graph id": 1, "graph node id"), the optimizer eager
# (cudaLaunchKernel each). CPU runtime events + ProfilerStep#N markers present.
import lib, copy
d = lib.load(); ops = lib.ops(d)
rt = []; i = 0; corr = 7000000
for s in range(3):
    corr += 1; gcorr = corr
    first = ops[i]
    rt.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 601, "tid": 601,
               "ts": round(first['ts'] - 400.0, 3), "dur": 40.0, "args": {"External id": gcorr, "correlation": gcorr, "cbid": 311}})
    step_start = first['ts'] - 410.0
    for j in range(983):
        e = ops[i]; i += 1
        if j < 974:
            e['args']['correlation'] = gcorr; e['args']['External id'] = gcorr
            e['args']['graph id'] = 1; e['args']['graph node id'] = 1000 + j
        else:
            corr += 1; e['args']['correlation'] = corr; e['args']['External id'] = corr
            rt.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 601, "tid": 601,
                       "ts": round(e['ts'] - 30.0 - (983 - j) * 5, 3), "dur": 4.0, "args": {"External id": corr, "correlation": corr, "cbid": 211}})
    rt.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % s, "pid": 601, "tid": 601,
               "ts": round(step_start, 3), "dur": 0.0, "args": {}})
# marker durations: to the next marker
mk = [e for e in rt if e['cat'] == 'user_annotation']
for a, b in zip(mk, mk[1:]): a['dur'] = round(b['ts'] - a['ts'] - 1.0, 3)
mk[-1]['dur'] = round(ops[-1]['ts'] - mk[-1]['ts'], 3)
d['traceEvents'] += rt
lib.save(d, 'v/graph_kineto.json.gz')
