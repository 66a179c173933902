import json, struct, numpy as np, sys
K,N=int(sys.argv[1]),int(sys.argv[2])
w=(np.random.RandomState(0).rand(K,N).astype(np.float32)-0.5)*0.1
hdr={"w":{"dtype":"F32","shape":[K,N],"data_offsets":[0,w.nbytes]}}
h=json.dumps(hdr).encode(); h+=b" "*((8-len(h)%8)%8)
open(f"w_{K}_{N}.safetensors","wb").write(struct.pack("<Q",len(h))+h+w.tobytes())
for M in [1,2,4,8,16,32,64,128]:
    # 8 independent matmuls of the same weight, so per-call time dominates the run
    body="\n".join(f"  %y{i}: f32[{M},{N}] = matmul(%x{i}, %w)" for i in range(8))
    xs=", ".join(f"%x{i}: f32[{M},{K}]" for i in range(8))
    ys=", ".join(f"%y{i}" for i in range(8))
    open(f"p_{K}_{N}_{M}.kir","w").write(f"graph @main({xs}, param %w: f32[{K},{N}]) {{\n{body}\n  return {ys}\n}}\n")
    open(f"i_{K}_{N}_{M}.kir","w").write(f"graph @main({xs}, %w: f32[{K},{N}]) {{\n{body}\n  return {ys}\n}}\n")
