"""A second sweep of models kiln had not met (torchvision classifiers and video networks,
Hugging Face encoders, decoders, vision and audio models), small configs, random weights:
sweep2_models.py OUT_DIR [NAME ...]."""
import os, sys, torch
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../.."))
sys.path.insert(0, os.path.join(here, "../tiled_loops_cpu_2026-12-03"))
import export_models as em
from export_models import keyword_model, tokens, last_hidden_state, causal_lm, torchvision_model
from sweep_models import hf, ids, pixels, export_all

M = {}
for name, size, exporter, opts in [
        ("densenet121", 224, "torchscript", {}), ("googlenet", 224, "dynamo", {"aux_logits": False, "init_weights": True}),
        ("inception_v3", 299, "torchscript", {"aux_logits": False, "init_weights": True}),
        ("shufflenet_v2_x1_0", 224, "dynamo", {}), ("squeezenet1_1", 224, "torchscript", {}),
        ("regnet_y_400mf", 224, "dynamo", {}), ("mnasnet1_0", 224, "torchscript", {}),
        ("mobilenet_v3_large", 224, "dynamo", {}), ("efficientnet_v2_s", 224, "dynamo", {}),
        ("resnext50_32x4d", 224, "torchscript", {}), ("vgg11_bn", 224, "dynamo", {}), ("alexnet", 224, "torchscript", {}),
        ("vit_b_32", 224, "dynamo", {}), ("swin_v2_t", 224, "torchscript", {})]:
    M[name] = (torchvision_model(name, size, **opts), exporter)

def video(name, frames=8, size=112):
    def build():
        import torchvision
        return getattr(torchvision.models.video, name)(weights=None), (torch.randn(1, 3, frames, size, size, generator=torch.Generator().manual_seed(0)),), ["input"]
    return build
M["r2plus1d_18"] = (video("r2plus1d_18"), "dynamo")
M["mc3_18"] = (video("mc3_18"), "torchscript")
M["s3d"] = (video("s3d", 16, 128), "dynamo")
M["mvit_v2_s"] = (video("mvit_v2_s", 16, 224), "dynamo")

def audio(n=16000):
    return lambda c: {"input_values": torch.randn(1, n, generator=torch.Generator().manual_seed(0))}
tiny = dict(num_hidden_layers=2, hidden_size=256, intermediate_size=1024, num_attention_heads=4)
M["xlnet"] = (hf("XLNetModel", "XLNetConfig", ids(), n_layer=2, d_model=256, d_inner=1024, n_head=4, vocab_size=4000), "dynamo")
M["funnel"] = (hf("FunnelBaseModel", "FunnelConfig", ids(), block_sizes=[1, 1], d_model=256, d_inner=1024, n_head=4, d_head=64, vocab_size=4000), "dynamo")
M["squeezebert"] = (hf("SqueezeBertModel", "SqueezeBertConfig", ids(), embedding_size=256, vocab_size=4000, **tiny), "dynamo")
M["convbert"] = (hf("ConvBertModel", "ConvBertConfig", ids(), embedding_size=256, vocab_size=4000, **tiny), "dynamo")
M["layoutlm"] = (hf("LayoutLMModel", "LayoutLMConfig", lambda c: {"input_ids": tokens(c.vocab_size, 64), "bbox": torch.randint(0, 500, (1, 64, 4), generator=torch.Generator().manual_seed(1)).sort(-1).values}, vocab_size=4000, **tiny), "dynamo")
M["gpt_bigcode"] = (causal_lm("gpt_bigcode", n_embd=256, n_layer=2, n_head=4, vocab_size=4000), "dynamo")
M["codegen"] = (causal_lm("codegen", n_embd=256, n_layer=2, n_head=4, rotary_dim=32, vocab_size=4000), "dynamo")
M["stablelm"] = (causal_lm("stablelm", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, vocab_size=4000), "dynamo")
M["olmo"] = (causal_lm("olmo", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, vocab_size=4000), "dynamo")
M["xglm"] = (causal_lm("xglm", d_model=256, ffn_dim=1024, num_layers=2, attention_heads=4, vocab_size=4000), "dynamo")
M["mamba"] = (causal_lm("mamba", hidden_size=128, num_hidden_layers=2, state_size=8, vocab_size=4000), "dynamo")
def seq2seq(model_cls, config_cls, **cfg):
    def build():
        import transformers
        m = getattr(transformers, model_cls)(getattr(transformers, config_cls)(**cfg))
        return keyword_model(m, {"input_ids": tokens(4000, 32, low=3), "decoder_input_ids": tokens(4000, 8, seed=1, low=3)}, lambda o: o.last_hidden_state)
    return build
s2s = dict(vocab_size=4000, d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, use_cache=False)
M["marian"] = (seq2seq("MarianModel", "MarianConfig", decoder_vocab_size=4000, pad_token_id=1, **s2s), "dynamo")
M["pegasus"] = (seq2seq("PegasusModel", "PegasusConfig", **s2s), "dynamo")
M["mt5"] = (seq2seq("MT5Model", "MT5Config", vocab_size=4000, d_model=256, d_ff=512, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=64, use_cache=False), "dynamo")
M["vit_mae"] = (hf("ViTMAEModel", "ViTMAEConfig", lambda c: {"pixel_values": pixels()(c)["pixel_values"], "noise": torch.rand(1, 196, generator=torch.Generator().manual_seed(2))}, **tiny), "dynamo")
M["dpt"] = (hf("DPTForDepthEstimation", "DPTConfig", pixels(), output=lambda o: o.predicted_depth, hidden_size=256, intermediate_size=1024, num_hidden_layers=4, num_attention_heads=4, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[32, 64, 128, 256], fusion_hidden_size=64), "dynamo")
M["glpn"] = (hf("GLPNForDepthEstimation", "GLPNConfig", pixels(128), output=lambda o: o.predicted_depth, depths=[1, 1, 1, 1]), "dynamo")
M["cvt"] = (hf("CvtModel", "CvtConfig", pixels(), depth=[1, 1, 1]), "dynamo")
M["pvt_v2"] = (hf("PvtV2Model", "PvtV2Config", pixels(), depths=[1, 1, 1, 1]), "dynamo")
M["focalnet"] = (hf("FocalNetModel", "FocalNetConfig", pixels(), depths=[1, 1, 1, 1], embed_dim=48), "dynamo")
M["efficientformer"] = (hf("EfficientFormerModel", "EfficientFormerConfig", pixels(), depths=[1, 1, 1, 2], num_meta3d_blocks=1), "dynamo")
M["bit"] = (hf("BitModel", "BitConfig", pixels(), output=lambda o: o.pooler_output, depths=[1, 1, 1, 1]), "dynamo")
M["mobilevitv2"] = (hf("MobileViTV2Model", "MobileViTV2Config", pixels(128), output=lambda o: o.pooler_output), "dynamo")
M["ast"] = (hf("ASTModel", "ASTConfig", lambda c: {"input_values": torch.randn(1, 256, 128, generator=torch.Generator().manual_seed(0))}, max_length=256, **tiny), "dynamo")
M["wavlm"] = (hf("WavLMModel", "WavLMConfig", audio(), **tiny), "dynamo")
M["data2vec_audio"] = (hf("Data2VecAudioModel", "Data2VecAudioConfig", audio(), **tiny), "dynamo")
M["sew"] = (hf("SEWModel", "SEWConfig", audio(), **tiny), "dynamo")
M["videomae"] = (hf("VideoMAEModel", "VideoMAEConfig", lambda c: {"pixel_values": torch.randn(1, 16, 3, 112, 112, generator=torch.Generator().manual_seed(0))}, image_size=112, **tiny), "dynamo")
M["timesformer"] = (hf("TimesformerModel", "TimesformerConfig", lambda c: {"pixel_values": torch.randn(1, 8, 3, 112, 112, generator=torch.Generator().manual_seed(0))}, image_size=112, num_frames=8, **tiny), "dynamo")
em.MODELS.update(M)
if __name__ == "__main__":
    export_all(M)
