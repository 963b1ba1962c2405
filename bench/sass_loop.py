#!/usr/bin/env python3
"""sass_loop.py FILE.sass [list]: for each function of cuobjdump -sass output, the instruction
mix of the loop holding the most HMMA (the GEMM mainloop): counts by opcode, total per 64
HMMA; with a second argument, the loop's instructions too."""
import re, sys, collections


def report(name, lines):
    ins = []      # (opcode, text)
    labels = {}   # label or address -> index
    for ln in lines:
        m = re.match(r'\s*\.(L_x_\d+):', ln)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)', ln)
        if m:
            labels['0x' + m.group(1).lstrip('0')] = len(ins)
            ins.append((m.group(3), (m.group(2) or '') + m.group(3) + m.group(4)))
    best = None
    for i, (op, text) in enumerate(ins):
        if op.startswith('BRA'):
            m = re.search(r'`?\(?\.?(L_x_\d+|0x[0-9a-f]+)', text.split('BRA', 1)[1])
            if m and m.group(1) in labels and labels[m.group(1)] <= i:
                s = labels[m.group(1)]
                n = sum(1 for o, _ in ins[s:i + 1] if o.startswith('HMMA'))
                if n and (best is None or n > best[2]):
                    best = (s, i, n)
    if not best:
        return
    s, e, n = best
    body = ins[s:e + 1]
    c = collections.Counter(o.split('.')[0] for o, _ in body)
    tot = len(body)
    print(name + ': mainloop: %d instructions, %d HMMA, %.1f per 64 HMMA' % (tot, n, tot * 64.0 / n))
    print('  ' + ', '.join('%s %d' % kv for kv in c.most_common()))
    intops = sum(v for k, v in c.items() if k in ('IMAD', 'IADD3', 'LEA', 'SHF', 'SEL', 'ISETP', 'LOP3', 'IABS', 'MOV', 'IMNMX', 'PRMT', 'UIADD3', 'UIMAD', 'ULEA', 'USHF', 'UMOV', 'ULOP3', 'UISETP', 'USEL', 'LEA', 'P2R', 'R2P', 'PLOP3'))
    print('  integer/move/predicate: %d' % intops)
    if len(sys.argv) > 2:
        for o, t in body:
            print('   ', t.strip()[:110])

funcs, cur, name = [], [], '?'
for ln in open(sys.argv[1]).read().splitlines():
    m = re.match(r'\s*Function : (\S+)', ln)
    if m:
        funcs.append((name, cur))
        cur, name = [], m.group(1)
    cur.append(ln)
funcs.append((name, cur))
for name, lines in funcs:
    report(name, lines)
