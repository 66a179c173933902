# ONNX Runtime per-node kernel times (CPU, 2 intra-op threads, random inputs): ort_nodes.py MODEL.onnx prints each node's median over 30 profiled runs after 10, in graph order.
import onnxruntime as ort, numpy as np, json, sys, collections
m=sys.argv[1]
so=ort.SessionOptions(); so.intra_op_num_threads=2; so.enable_profiling=True
so.profile_file_prefix='/tmp/ortprof_'
s=ort.InferenceSession(m, so, providers=['CPUExecutionProvider'])
inp={}
for i in s.get_inputs():
    shape=[d if isinstance(d,int) else 1 for d in i.shape]
    if 'int' in i.type: inp[i.name]=np.ones(shape, dtype=np.int64)
    else: inp[i.name]=np.random.rand(*shape).astype(np.float32)
for _ in range(40): s.run(None, inp)
f=s.end_profiling()
ev=json.load(open(f))
d=collections.defaultdict(list); op={}; order=[]
for e in ev:
    if e.get('cat')=='Node' and e['name'].endswith('_kernel_time'):
        if e['name'] not in d: order.append(e['name'])
        d[e['name']].append(e['dur']); op[e['name']]=e['args'].get('op_name','?')
for k in order:
    v=sorted(d[k][10:]); print(f"{v[len(v)//2]/1000:8.3f} {op[k]:12s} {k}")
