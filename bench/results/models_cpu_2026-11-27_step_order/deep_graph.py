# A deep graph for fusion's own time: N blocks of x + layer_norm(softmax(tanh(x * w))),
# summed to a loss. `kiln opt deep.kir --wrt=w,g --passes=autodiff` makes it a training
# graph (N=1200: 63,602 lines).
import sys
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1200
print("graph @deep(%x: f32[64,256], param %w: f32[256], param %g: f32[256]) {")
prev = "%x"
for i in range(n):
    print(f"  %wb{i}: f32[64,256] = broadcast(%w) {{shape=[64,256], dims=[1]}}")
    print(f"  %m{i}: f32[64,256] = mul({prev}, %wb{i})")
    print(f"  %t{i}: f32[64,256] = tanh(%m{i})")
    print(f"  %s{i}: f32[64,256] = softmax(%t{i}) {{axis=1}}")
    print(f"  %n{i}: f32[64,256] = layer_norm(%s{i}, %g, %w) {{axis=1}}")
    print(f"  %r{i}: f32[64,256] = add({prev}, %n{i})")
    prev = f"%r{i}"
print(f"  %loss: f32[] = reduce_sum({prev}) {{axes=[0,1]}}")
print("  return %loss")
print("}")
