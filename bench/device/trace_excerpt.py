"""Cut a window of whole steps out of a gearshift trace (for small test fixtures; data/step_traces/README.md).

    python3 trace_excerpt.py FULL.trace.jsonl.gz OUT.trace.jsonl.gz FIRST_UPDATE STEPS
    python3 trace_excerpt.py FULL.trace.jsonl.gz OUT.trace.jsonl.gz --last-s SECONDS

The second form keeps the last SECONDS of the trace's ops (from the last op's start back), for a job whose
optimizer no name marks (a hand-written update): a partial step at each end, whole steps between.

Keeps every name record, the ops, samples and synchronizes starting from 200 ops before optimizer update FIRST_UPDATE
(0-based, updates found as the detector does: optimizer kernels with at most 6 other ops between) up to 100 ops
after update FIRST_UPDATE + STEPS, and writes a fresh trailer; `meta.excerpt` records the window.
"""
import gzip
import json
import re
import sys

OPTIMIZER = re.compile(r'multi_tensor_apply|adam|optimizer|sgd', re.I)


def is_optimizer(name):
    return bool(OPTIMIZER.search(name)) and 'hadamard' not in name.lower()


def main(src, dst, first, steps, last_s=None):
    lines = gzip.open(src, 'rt').read().splitlines()
    header = json.loads(lines[0])
    records = [json.loads(line) for line in lines[1:]]
    names = {r[1]: r[2] for r in records if r[0] == 'n'}
    ops = sorted((r for r in records if r[0] in ('k', 'c', 's')), key=lambda r: r[2])
    if last_s is not None:
        hi = ops[-1][2] + 1
        lo = hi - int(last_s * 1e9)
        excerpt = f'{src.split("/")[-1]}: the ops of its last {last_s:g} s'
    else:
        blocks, last = [], -100
        for i, r in enumerate(ops):
            if not is_optimizer(names[r[1]]):
                continue
            if blocks and i - last <= 7:
                blocks[-1][1] = i + 1
            else:
                blocks.append([i, i + 1])
            last = i
        lo = ops[max(0, blocks[first][0] - 200)][2]
        hi = ops[min(len(ops) - 1, blocks[first + steps][1] + 100)][2]
        excerpt = (f'{src.split("/")[-1]}: ops from 200 before optimizer update {first + 1} '
                   f'(of {len(blocks)}) to 100 after update {first + steps + 1}: {steps} whole steps')
    keep = [r for r in records if r[0] == 'n' or (r[0] in ('k', 'c', 's', 'p', 'm') and lo <= r[2] < hi)]
    # The job's synchronizes entered in the window (time field 5), and the graph launches of the kept ops.
    keep += [r for r in records if r[0] == 'y' and lo <= r[5] < hi]
    kept_corr = {r[6] for r in keep if r[0] == 'k'}
    keep = [r for r in records if r[0] == 'g' and r[1] in kept_corr] + keep
    header['meta']['excerpt'] = excerpt
    count = sum(1 for r in keep if r[0] not in ('n', 'g'))
    syncs = any(r[0] == 'y' for r in keep)
    with gzip.open(dst, 'wt', compresslevel=9) as f:
        f.write(json.dumps(header, separators=(',', ':')) + '\n')
        for r in keep:
            f.write(json.dumps(r, separators=(',', ':')) + '\n')
        trailer = {'complete': True, 'dropped_records': 0, 'note': 'excerpt', 'records': count, 'synchronizes': syncs}
        f.write(json.dumps(['end', trailer], separators=(',', ':')) + '\n')
    print(f'{dst}: {sum(1 for r in keep if r[0] in "kcs")} ops, {sum(1 for r in keep if r[0] == "k")} kernels')


if __name__ == '__main__':
    if sys.argv[3] == '--last-s':
        main(sys.argv[1], sys.argv[2], 0, 0, float(sys.argv[4]))
    else:
        main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
