# The optimizer-per-layer trace of gen_opt_in_backward.py with Kineto launch events and one true ProfilerStep
# marker per training step (987 ops each); meta removed. Run gen_opt_in_backward.py first.
import lib
d = lib.load('v/opt_in_backward.json.gz')
d.pop('meta', None)
L = lib.add_launches(d)
lib.add_markers(d, L, [0, 987, 1974])
lib.save(d, 'v/opt_in_backward_markers.json.gz')
