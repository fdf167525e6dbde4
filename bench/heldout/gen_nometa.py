# strip the trace's meta (a plain torch.profiler export has none): usage gen_nometa.py IN OUT
import lib, sys
d = lib.load(sys.argv[1]); d.pop('meta', None); lib.save(d, sys.argv[2])
