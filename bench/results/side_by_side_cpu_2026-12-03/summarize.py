import re,sys,statistics as st,collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
cur=None
for line in open(sys.argv[1]):
    m=re.match(r"== round (\d+) (\S+) (\S+)",line)
    if m: cur=(int(m[1]),m[2],m[3]); continue
    m=re.search(r"median ([\d.]+) ms",line)
    if m and cur: d[cur[1]][cur[2]].append((cur[0],float(m[1])))
print("| model | side by side ms (medians) | in order ms (medians) | side by side / in order per round | median ratio |")
print("|---|---|---|---|---|")
for model,modes in d.items():
    a=[x for _,x in sorted(modes['side_by_side'])]; b=[x for _,x in sorted(modes['in_order'])]
    r=[x/y for x,y in zip(a,b)]
    print(f"| {model} | {', '.join(f'{x:.3f}' for x in a)} | {', '.join(f'{x:.3f}' for x in b)} | {', '.join(f'{x:.2f}' for x in r)} | {st.median(r):.2f} |")
