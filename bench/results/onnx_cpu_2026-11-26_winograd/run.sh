#!/bin/sh
# Winograd's 3x3 convolutions on the CPU (docs/cpu.md, docs/benchmarks.md): the 2-core
# development VM, 2026-11-26. K: a `bazel build -c opt //tools:kiln` of this tree, copied
# out; M: bench/export_models.py's folder; python3 with onnxruntime and torch.
set -e
K=${K:?a kiln binary}
M=${M:-/tmp/models}
OUT=$(cd "$(dirname "$0")" && pwd)
A=$(mktemp -d)
for m in resnet18 resnet50 googlenet inception_v3 densenet121 squeezenet1_1; do
  "$K" compile "$M/$m.onnx" -o "$A/$m.kiln" > /dev/null
done
# 1. The same artifacts with Winograd off and on, alternating, 3 rounds.
for r in 1 2 3; do
  for mode in off on; do
    for m in resnet18 resnet50 googlenet inception_v3 densenet121 squeezenet1_1; do
      KILN_CPU_WINOGRAD=$mode "$K" bench "$A/$m.kiln" --repeat 100 > "$OUT/ab_${m}_${mode}_$r.txt" 2>&1
    done
  done
done
# 2. ResNet-50's profile off and on, 2 rounds.
for r in 1 2; do
  for mode in off on; do
    KILN_CPU_WINOGRAD=$mode "$K" bench "$A/resnet50.kiln" --profile --repeat 100 > "$OUT/profile_resnet50_${mode}_$r.txt" 2>&1
  done
done
# 3. The six models beside ONNX Runtime and PyTorch, 5 rounds.
python3 bench/onnx_models.py "$M" --kiln "$K" --models resnet18,resnet50,mobilenet_v2,vit_b_16,bert_base,gpt2_small \
  --rounds 5 --json "$OUT/six_models.json" > "$OUT/six_models.txt" 2>&1
rm -rf "$A"
# 4. The thirteen further networks beside ONNX Runtime and PyTorch, 3 rounds.
python3 bench/onnx_models.py "$M" --kiln "$K" \
  --models googlenet,inception_v3,densenet121,resnext50_32x4d,regnet_y_400mf,squeezenet1_1,efficientnet_b0,convnext_tiny,mnasnet1_0,shufflenet_v2_x1_0,mobilenet_v3_small,swin_t,maxvit_t \
  --rounds 3 --json "$OUT/zoo.json" > "$OUT/zoo.txt" 2>&1
# 5. Two plain stacks of 3x3 convolutions (bench/export_models.py resnet34 vgg16): beside
# ONNX Runtime and PyTorch, 3 rounds, then Winograd off and on, alternating, 3 rounds.
python3 bench/onnx_models.py "$M" --kiln "$K" --models resnet34,vgg16 --rounds 3 \
  --json "$OUT/plain_stacks.json" > "$OUT/plain_stacks.txt" 2>&1
A=$(mktemp -d)
for m in resnet34 vgg16; do "$K" compile "$M/$m.onnx" -o "$A/$m.kiln" > /dev/null; done
for r in 1 2 3; do
  for mode in off on; do
    for m in resnet34 vgg16; do
      KILN_CPU_WINOGRAD=$mode "$K" bench "$A/$m.kiln" --repeat 30 > "$OUT/ab_${m}_${mode}_$r.txt" 2>&1
    done
  done
done
rm -rf "$A"
