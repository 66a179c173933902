import re,sys
# Sums bytes read and written by kernel steps of a printed program (kiln opt --pipeline=default).
txt=open(sys.argv[1]).read()
types={}
for m in re.finditer(r'%([\w.]+): (\w+)\[([\d,]*)\]',txt):
    types[m.group(1)]=(m.group(2),m.group(3))
size={'f32':4,'bf16':2,'f16':2,'i64':8,'i32':4,'bool':1,'f64':8}
def nbytes(v):
    t,s=types[v]; n=1
    for d in s.split(','):
        if d: n*=int(d)
    return n*size[t]
tot_r=tot_w=0
for m in re.finditer(r'^  (loop|reduction|library|scatter) @(\w+)\(([^)]*)\) -> \(([^)]*)\)',txt,re.M):
    ins=[x.strip()[1:] for x in m.group(3).split(',') if x.strip()]
    outs=[x.strip()[1:] for x in m.group(4).split(',') if x.strip()]
    r=sum(nbytes(v) for v in ins); w=sum(nbytes(v) for v in outs)
    if m.group(1)!='library':
        tot_r+=r; tot_w+=w
    if len(sys.argv)>2: print(f"{m.group(2):16s} {m.group(1):9s} read {r/1e6:8.1f} MB write {w/1e6:8.1f} MB")
print(f"kernels: read {tot_r/1e6:.1f} MB, write {tot_w/1e6:.1f} MB, total {(tot_r+tot_w)/1e6:.1f} MB")
