# time-unit variants: displayTimeUnit ns/ms with µs timestamps (Chrome spec: ts is always µs) and
# ts/dur written in ns (an nsys->chrome converter), with and without meta
import lib, copy
d = lib.load()
for u in ('ns', 'ms'):
    g = copy.deepcopy(d); g['displayTimeUnit'] = u; lib.save(g, f'v/u_display_{u}.json.gz')
g = copy.deepcopy(d); g['displayTimeUnit'] = 'ns'
for e in lib.ops(g): e['ts'] = round(e['ts'] * 1000); e['dur'] = round(e['dur'] * 1000)
lib.save(g, 'v/u_ts_in_ns_meta.json.gz'); g.pop('meta'); lib.save(g, 'v/u_ts_in_ns_nometa.json.gz')
g = copy.deepcopy(d)
for e in lib.ops(g): e['ts'] = e['ts'] / 1000; e['dur'] = e['dur'] / 1000   # ms
g.pop('meta'); lib.save(g, 'v/u_ts_in_ms_nometa.json.gz')
