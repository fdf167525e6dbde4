# Shared helpers of the held-out trace variants: load the shipped H200 traces, split them into steps, lay
# steps out again with other gaps, add Kineto launch events and ProfilerStep markers. Traces from
# ../shared/data/traces (GEARSHIFT_SHARED overrides the folder holding data/).
import copy, gzip, json, os
_SHARED = os.environ.get('GEARSHIFT_SHARED') or os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared')
SRC2 = os.path.join(_SHARED, 'data', 'traces', 'gpt2_h200_trace.json.gz')
SRCXL = os.path.join(_SHARED, 'data', 'traces', 'gpt3xl_h200_trace.json.gz')
def load(p=SRC2):
    op = gzip.open if p.endswith('.gz') else open
    return json.load(op(p,'rt'))
def save(d,p):
    op = gzip.open if p.endswith('.gz') else open
    with op(p,'wt') as f: json.dump(d,f)
def ops(d):
    ev=[e for e in d['traceEvents'] if e.get('ph')=='X' and e.get('cat') in ('kernel','gpu_memset','gpu_memcpy')]
    ev.sort(key=lambda e:e['ts'])
    return ev
def is_opt(e): return 'multi_tensor_apply' in e['name']
def steps(d):
    """split ops into steps: each ends after the optimizer run"""
    ev=ops(d); out=[]; cur=[]
    for i,e in enumerate(ev):
        cur.append(e)
        if is_opt(e) and (i+1==len(ev) or not is_opt(ev[i+1])):
            # include trailing ops until next non-opt? keep simple
            out.append(cur); cur=[]
    if cur: out.append(cur)
    return out

def with_gaps(seq):
    """annotate each op copy with its idle gap before it (within the sequence)"""
    out=[]; prev_end=None
    for e in seq:
        e=copy.deepcopy(e)
        e['_gap'] = 0.0 if prev_end is None else max(0.0, e['ts']-prev_end)
        prev_end = e['ts']+e['dur']; out.append(e)
    return out

def layout(seq, t0, first_gap=None):
    """lay ops out back to back with their _gap; returns list and end time"""
    t=t0; out=[]
    for i,e in enumerate(seq):
        e=copy.deepcopy(e)
        g=e.pop('_gap',2.0)
        if i==0 and first_gap is not None: g=first_gap
        t+=g; e['ts']=round(t,3); t+=e['dur']; out.append(e)
    return out, t

_corr=[9000000]
def newk(name, dur, like, cat='kernel'):
    e=copy.deepcopy(like); e['name']=name; e['dur']=dur; e['cat']=cat; e['_gap']=2.0
    _corr[0]+=1; e.setdefault('args',{})['correlation']=_corr[0]
    return e

def build(d, steps_ops, inter_gap=None, t0=None):
    """replace d's ops by concatenated steps (each a list of _gap-annotated ops)"""
    d=copy.deepcopy(d)
    allops=ops(d)
    t = allops[0]['ts'] if t0 is None else t0
    keep=[e for e in d['traceEvents'] if not (e.get('ph')=='X' and e.get('cat') in ('kernel','gpu_memset','gpu_memcpy'))]
    new=[]
    for i,s in enumerate(steps_ops):
        g = None if i==0 else (inter_gap[i] if isinstance(inter_gap,list) else inter_gap)
        lo,t=layout(s,t, first_gap=(0.0 if i==0 else g))
        new+=lo
    d['traceEvents']=keep+new
    return d
def fix_corr(d):
    c=10**7
    for e in d['traceEvents']:
        if e.get('cat') in ('kernel','gpu_memset','gpu_memcpy'):
            c+=1; e['args']['correlation']=c
    return d

def add_launches(d, lag=300.0, cpu_pid=601, cpu_tid=601):
    """add cudaLaunchKernel / cudaMemsetAsync runtime events (Kineto style) for every GPU op, CPU lag µs ahead,
    keeping launches ordered and non-overlapping on one CPU thread"""
    g = ops(d); ev = []; t_prev = None; launches = []
    for e in g:
        t = e['ts'] - lag
        if t_prev is not None and t < t_prev + 4.0: t = t_prev + 4.0
        # CPU cannot launch after the kernel started
        if t > e['ts'] - 1.0: t = e['ts'] - 1.0
        t_prev = t
        nm = {'kernel': 'cudaLaunchKernel', 'gpu_memset': 'cudaMemsetAsync', 'gpu_memcpy': 'cudaMemcpyAsync'}[e['cat']]
        r = {"ph": "X", "cat": "cuda_runtime", "name": nm, "pid": cpu_pid, "tid": cpu_tid, "ts": round(t, 3), "dur": 3.0,
             "args": {"External id": e['args']['correlation'], "cbid": 211, "correlation": e['args']['correlation']}}
        e['args']['External id'] = e['args']['correlation']
        ev.append(r); launches.append((e, r))
    d['traceEvents'] += ev
    return launches

def add_markers(d, launches, starts, name='ProfilerStep#{}', first=0, cpu_pid=601, cpu_tid=601):
    """markers: starts = indices into launches where a marker begins; each ends before the next begins"""
    evs = []
    for k, i in enumerate(starts):
        t0 = launches[i][1]['ts'] - 5.0
        t1 = launches[starts[k+1]][1]['ts'] - 6.0 if k + 1 < len(starts) else launches[-1][1]['ts'] + 10.0
        evs.append({"ph": "X", "cat": "user_annotation", "name": name.format(first + k), "pid": cpu_pid, "tid": cpu_tid,
                    "ts": round(t0, 3), "dur": round(t1 - t0, 3), "args": {"External id": 100 + k}})
    d['traceEvents'] += evs
