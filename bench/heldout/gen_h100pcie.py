# gpt2 trace as if recorded on an H100 PCIe (350 W board, max SM 1755 MHz, HBM2e 1593 MHz):
# deviceProperties as Kineto writes them, meta power at 300 W (below the PCIe's 350 W cap)
import lib
d = lib.load()
d['deviceProperties'] = [{"id": 0, "name": "NVIDIA H100 PCIe", "totalGlobalMem": 85030617088, "computeMajor": 9, "computeMinor": 0,
    "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "regsPerMultiprocessor": 65536,
    "warpSize": 32, "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 233472, "numSms": 114, "sharedMemPerBlockOptin": 232448}]
m = d['meta']; m['avg_W'] = 300.0; m['J_per_iter'] = m['s_per_iter'] * 300.0
lib.save(d, 'v/h100pcie_300W.json.gz')
d['deviceProperties'][0]['name'] = "NVIDIA H200 NVL"; m['avg_W']=590.0; m['J_per_iter'] = m['s_per_iter'] * 590.0
lib.save(d, 'v/h200nvl_590W.json.gz')
