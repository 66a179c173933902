"""A fifth, smaller sweep (time-series models with FFTs, multimodal and segmentation
towers, spectral modules written in PyTorch): sweep5_models.py OUT_DIR [NAME ...]."""
import os, sys, torch
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../.."))
sys.path.insert(0, os.path.join(here, "../tiled_loops_cpu_2026-12-03"))
sys.path.insert(0, os.path.join(here, "../sweep2_cpu_2026-12-03"))
import export_models as em
from export_models import keyword_model, tokens, last_hidden_state
from sweep_models import hf, ids, pixels, export_all
from sweep2_models import tiny


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def series(context, features=1, extra=None):
    def inputs(c):
        n = context + max(c.lags_sequence)
        d = {"past_values": torch.randn(1, n, generator=gen()) if features == 1 else torch.randn(1, n, features, generator=gen()),
             "past_time_features": torch.randn(1, n, c.num_time_features, generator=gen(1)),
             "past_observed_mask": torch.ones(1, n) if features == 1 else torch.ones(1, n, features),
             "future_values": torch.randn(1, c.prediction_length, generator=gen(2)) if features == 1 else torch.randn(1, c.prediction_length, features, generator=gen(2)),
             "future_time_features": torch.randn(1, c.prediction_length, c.num_time_features, generator=gen(3))}
        return d
    return inputs


ts = dict(prediction_length=8, context_length=32, lags_sequence=[1, 2, 3], num_time_features=2, d_model=32,
          encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
          encoder_ffn_dim=64, decoder_ffn_dim=64)


class Spectral(torch.nn.Module):
    """rfft, a learned filter in frequency, irfft; and an STFT's magnitude (audio front ends)."""
    def __init__(self):
        super().__init__()
        g = gen(5)
        self.filter = torch.nn.Parameter(torch.randn(33, generator=g))
        self.register_buffer("window", torch.hann_window(32))

    def forward(self, x):
        f = torch.fft.rfft(x, dim=-1) * self.filter
        y = torch.fft.irfft(f, n=64, dim=-1)
        s = torch.stft(x[:, 0], n_fft=32, hop_length=8, window=self.window, center=False, return_complex=True).abs()
        return y.sum(-1, keepdim=True) + s.mean(-1).sum(-1)[:, None, None]


M = {}
M["autoformer"] = (hf("AutoformerModel", "AutoformerConfig", series(32), **ts), "dynamo")
M["informer"] = (hf("InformerModel", "InformerConfig", series(32), attention_type="full", **ts), "dynamo")
M["time_series_transformer"] = (hf("TimeSeriesTransformerModel", "TimeSeriesTransformerConfig", series(32), **ts), "dynamo")
M["clip_text"] = (hf("CLIPTextModel", "CLIPTextConfig", ids(32), output=lambda o: o.pooler_output, vocab_size=4000, **tiny), "dynamo")
M["owlvit_vision"] = (hf("OwlViTVisionModel", "OwlViTVisionConfig", pixels(224), output=lambda o: o.pooler_output, patch_size=32, **tiny), "dynamo")
M["blip_vision"] = (hf("BlipVisionModel", "BlipVisionConfig", pixels(224), output=lambda o: o.pooler_output, patch_size=32, **tiny), "dynamo")
M["sam_vision"] = (hf("SamVisionModel", "SamVisionConfig", pixels(256), output=lambda o: o.last_hidden_state, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=256, global_attn_indexes=[1], window_size=4, output_channels=64, mlp_dim=256), "dynamo")
M["layoutlmv3"] = (hf("LayoutLMv3Model", "LayoutLMv3Config", lambda c: {"input_ids": tokens(4000, 32), "bbox": torch.randint(0, 500, (1, 32, 4), generator=gen(1)).sort(-1).values}, vocab_size=4000, visual_embed=False, **tiny), "dynamo")
M["upernet"] = (hf("UperNetForSemanticSegmentation", "UperNetConfig", pixels(128), output=lambda o: o.logits, backbone_config={"model_type": "convnext", "depths": [1, 1, 1, 1], "hidden_sizes": [32, 64, 128, 256], "out_features": ["stage1", "stage2", "stage3", "stage4"]}, hidden_size=64, auxiliary_in_channels=128, num_labels=5), "dynamo")
M["mask2former"] = (hf("Mask2FormerModel", "Mask2FormerConfig", pixels(128), output=lambda o: o.transformer_decoder_last_hidden_state, backbone_config={"model_type": "swin", "embed_dim": 32, "depths": [1, 1, 1, 1], "num_heads": [1, 2, 4, 8], "out_features": ["stage1", "stage2", "stage3", "stage4"]}, hidden_dim=64, feature_size=64, mask_feature_size=64, encoder_layers=1, decoder_layers=2, num_queries=10, encoder_feedforward_dim=128, dim_feedforward=128), "dynamo")
M["spectral"] = (lambda: (Spectral(), (torch.randn(2, 4, 64, generator=gen()),), ["x"]), "dynamo")
em.MODELS.update(M)
if __name__ == "__main__":
    export_all(M)
