# per-layer foreach copy (FSDP2-like, see gen_foreach_per_layer.py) + Kineto launch events + TRUE ProfilerStep#N markers
# (one per training step); meta removed unless argv[1]=='meta'
import lib, sys
d = lib.load('v/foreach_per_layer_3steps.json.gz')
if not (len(sys.argv) > 1 and sys.argv[1] == 'meta'): d.pop('meta')
L = lib.add_launches(d)
lib.add_markers(d, L, [0, 1008, 2016])
lib.save(d, 'v/foreach_per_layer_markers%s.json.gz' % ('_meta' if 'meta' in d else ''))
