# meta (measured calibration) variants on the GPT-2 H200 trace
import lib, copy
d = lib.load(); m0 = d['meta']
V = {
 'only_avgW': {'avg_W': 608.8},
 'only_J': {'J_per_iter': 51.69},
 'only_s': {'s_per_iter': 0.0849},
 'avgW_150': {'s_per_iter': 0.0849, 'J_per_iter': 0.0849*150, 'avg_W': 150.0},
 'avgW_90_below_idle': {'s_per_iter': 0.0849, 'J_per_iter': 0.0849*90, 'avg_W': 90.0},
 'inconsistent_J_vs_W': {'s_per_iter': 0.0849, 'J_per_iter': 51.69, 'avg_W': 300.0},
 'zero': {'s_per_iter': 0, 'J_per_iter': 0, 'avg_W': 0},
 'negative': {'s_per_iter': -0.0849, 'J_per_iter': -51.69, 'avg_W': -608.8},
 'strings': {'s_per_iter': "0.0849", 'J_per_iter': "51.69", 'avg_W': "608.8"},
 'nested_other_gpu': {'model': 'gpt2', 'per_gpu': [{'gpu': 1, 'avg_W': 120.0, 'J_per_iter': 10.2, 's_per_iter': 0.0849}]},
 'both_keys_conflict': {'s_per_iter': 0.0849, 'J_per_iter': 51.69, 'J_per_step': 5.169, 'avg_W': 608.8},
 'J_per_iter_is_whole_run': {'s_per_iter': 0.0849, 'J_per_iter': 51.69*20, 'avg_W': 608.8},
}
for k, m in V.items():
    g = copy.deepcopy(d); g['meta'] = m; lib.save(g, f'v/meta_{k}.json.gz')
