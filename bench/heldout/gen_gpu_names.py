# gpt2 H200 trace with deviceProperties naming another GPU (as Kineto writes it)
import lib, copy
base = lib.load()
names = {
 'h100pcie': ("NVIDIA H100 PCIe", 114, 85899345920),
 'h100nvl':  ("NVIDIA H100 NVL", 132, 100485038080),
 'h200nvl':  ("NVIDIA H200 NVL", 132, 150754820096),
 'a100pcie40': ("NVIDIA A100-PCIE-40GB", 108, 42505273344),
 'a100sxm40': ("NVIDIA A100-SXM4-40GB", 108, 42505273344),
 'h100sxm': ("NVIDIA H100 80GB HBM3", 132, 85520809984),
 'h200': ("NVIDIA H200", 132, 150754820096),
 'l4': ("NVIDIA L4", 58, 23580639232),
 'gh200': ("NVIDIA GH200 480GB", 132, 102005473280),
 'empty': ("", 132, 150754820096),
}
for k,(n,sms,mem) in names.items():
    d = copy.deepcopy(base)
    d['deviceProperties'] = [{"id": 0, "name": n, "totalGlobalMem": mem, "computeMajor": 9, "computeMinor": 0,
        "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "regsPerMultiprocessor": 65536,
        "warpSize": 32, "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472, "numSms": sms, "sharedMemPerBlockOptin": 232448}]
    lib.save(d, f'v/gpu_{k}.json.gz')
