"""recheck_zero_outputs.py OUT_DIR: HF MobileViT-v2 and EfficientNet, whose outputs in sweeps
2 and 3 were all zeros with Hugging Face's initialization (so that check compared nothing),
exported with every normalization's scale, shift and statistics drawn at random."""
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../.."))
sys.path.insert(0, os.path.join(here, "../tiled_loops_cpu_2026-12-03"))
import export_models as em
from sweep_models import hf, pixels, export_all

import torch


def perturbed(build):
    def wrapped():
        module, inputs, names = build()
        g = torch.Generator().manual_seed(3)
        with torch.no_grad():
            for m in module.modules():
                if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.GroupNorm, torch.nn.LayerNorm)):
                    if m.weight is not None:
                        m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                        m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                    if isinstance(m, torch.nn.BatchNorm2d):
                        m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                        m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
        return module, inputs, names
    return wrapped


M = {"mobilevitv2_hidden": (perturbed(hf("MobileViTV2Model", "MobileViTV2Config", pixels(128))), "dynamo"),
     "efficientnet_hf_hidden": (perturbed(hf("EfficientNetModel", "EfficientNetConfig", pixels(),
                                             output=lambda o: o.pooler_output)), "dynamo")}
em.MODELS.update(M)
if __name__ == "__main__":
    export_all(M)
