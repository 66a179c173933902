#!/bin/bash
# The models suite on the CPU at 165f16c..9e60c0d (the attention backward as one step), then PyTorch on the same VM.
kiln bench --suite=models --repeat=5 --json kiln.json > kiln.txt
python3 bench/compare_torch.py kiln.json -o merged.json --device cpu > torch.txt
