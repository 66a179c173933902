"""Thirty-one models export_models.py did not have (Hugging Face causal LMs, encoders,
vision transformers, torchvision segmentation and video networks), small configs, random
weights: sweep_models.py OUT_DIR [NAME ...]. SegFormer and BEiT, which found this
session's changes, are now in export_models.py."""
import os, sys, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
import export_models as em
from export_models import keyword_model, tokens, last_hidden_state, causal_lm

def hf(model_cls_name, config_name, inputs_fn, output=last_hidden_state, **cfg):
    def build():
        import transformers
        config = getattr(transformers, config_name)(**cfg)
        model = getattr(transformers, model_cls_name)(config)
        return keyword_model(model, inputs_fn(config), output)
    return build

def ids(n=64, low=0):
    return lambda c: {"input_ids": tokens(c.vocab_size, n, low=low)}
def pixels(size=224, ch=3):
    return lambda c: {"pixel_values": torch.randn(1, ch, size, size, generator=torch.Generator().manual_seed(0))}
small = dict(num_hidden_layers=2)
M = {}
M["gpt_neox"] = (causal_lm("gpt_neox", hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4, rotary_pct=0.25, vocab_size=4000), "dynamo")
M["opt"] = (causal_lm("opt", hidden_size=256, ffn_dim=1024, num_hidden_layers=2, num_attention_heads=4, vocab_size=4000, word_embed_proj_dim=256), "dynamo")
M["bloom"] = (causal_lm("bloom", hidden_size=256, n_layer=2, n_head=4, vocab_size=4000), "dynamo")
M["falcon"] = (causal_lm("falcon", hidden_size=256, num_hidden_layers=2, num_attention_heads=4, vocab_size=4000), "dynamo")
M["phi"] = (causal_lm("phi", hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4, vocab_size=4000), "dynamo")
M["mistral"] = (causal_lm("mistral", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=4000, sliding_window=32), "dynamo")
M["qwen2"] = (causal_lm("qwen2", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=4000), "dynamo")
M["gemma"] = (causal_lm("gemma", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, head_dim=64, vocab_size=4000), "dynamo")
M["gptj"] = (causal_lm("gptj", n_embd=256, n_layer=2, n_head=4, rotary_dim=32, vocab_size=4000), "dynamo")
M["gpt2_ts"] = (causal_lm("gpt2", n_embd=256, n_layer=2, n_head=4, vocab_size=4000), "torchscript")
M["distilbert"] = (hf("DistilBertModel", "DistilBertConfig", ids(), n_layers=2, dim=256, hidden_dim=1024, n_heads=4, vocab_size=4000), "dynamo")
M["albert"] = (hf("AlbertModel", "AlbertConfig", ids(), num_hidden_layers=2, hidden_size=256, intermediate_size=1024, num_attention_heads=4, embedding_size=128, vocab_size=4000), "dynamo")
M["electra"] = (hf("ElectraModel", "ElectraConfig", ids(), num_hidden_layers=2, hidden_size=256, intermediate_size=1024, num_attention_heads=4, embedding_size=128, vocab_size=4000), "torchscript")
M["deberta_v2"] = (hf("DebertaV2Model", "DebertaV2Config", ids(), num_hidden_layers=2, hidden_size=256, intermediate_size=1024, num_attention_heads=4, vocab_size=4000), "dynamo")
M["mpnet"] = (hf("MPNetModel", "MPNetConfig", ids(low=2), num_hidden_layers=2, hidden_size=256, intermediate_size=1024, num_attention_heads=4, vocab_size=4000), "dynamo")
M["bart"] = (lambda: (lambda t: keyword_model(t, {"input_ids": tokens(4000, 32, low=3), "decoder_input_ids": tokens(4000, 8, seed=1, low=3)}, lambda o: o.last_hidden_state))(__import__("transformers").BartModel(__import__("transformers").BartConfig(vocab_size=4000, d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, use_cache=False))), "dynamo")
M["clip_vision"] = (hf("CLIPVisionModel", "CLIPVisionConfig", pixels(), output=lambda o: o.pooler_output, hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4, patch_size=32), "dynamo")
M["segformer"] = (hf("SegformerModel", "SegformerConfig", pixels(128), num_encoder_blocks=4, depths=[1,1,1,1], hidden_sizes=[32,64,160,256]), "dynamo")
M["mobilevit"] = (hf("MobileViTModel", "MobileViTConfig", pixels(128)), "dynamo")
M["deit"] = (hf("DeiTModel", "DeiTConfig", pixels(), hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4), "dynamo")
M["beit"] = (hf("BeitModel", "BeitConfig", pixels(), hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4, use_relative_position_bias=True), "dynamo")
M["dinov2"] = (hf("Dinov2Model", "Dinov2Config", pixels(112), hidden_size=256, num_hidden_layers=2, num_attention_heads=4, image_size=224), "dynamo")
M["convnextv2"] = (hf("ConvNextV2Model", "ConvNextV2Config", pixels(), depths=[1,1,1,1], hidden_sizes=[32,64,128,256]), "dynamo")
M["levit"] = (hf("LevitModel", "LevitConfig", pixels()), "dynamo")
M["poolformer"] = (hf("PoolFormerModel", "PoolFormerConfig", pixels(), depths=[1,1,1,1]), "dynamo")
M["hubert"] = (hf("HubertModel", "HubertConfig", lambda c: {"input_values": torch.randn(1, 16000, generator=torch.Generator().manual_seed(0))}, hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024), "dynamo")
M["yolos"] = (hf("YolosModel", "YolosConfig", pixels(), hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4, image_size=[224,224]), "dynamo")
M["swinv2"] = (hf("Swinv2Model", "Swinv2Config", pixels(), embed_dim=32, depths=[1,1,1,1], num_heads=[1,2,4,8]), "dynamo")
for n in ["deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large", "fcn_resnet50"]:
    def b(n=n):
        import torchvision
        m = getattr(torchvision.models.segmentation, n)(weights=None, weights_backbone=None)
        class W(torch.nn.Module):
            def __init__(s): super().__init__(); s.m = m
            def forward(s, x): return s.m(x)["out"]
        return W(), (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),), ["input"]
    M[n] = (b, "torchscript")
def video():
    import torchvision
    return torchvision.models.video.r3d_18(weights=None), (torch.randn(1, 3, 8, 112, 112, generator=torch.Generator().manual_seed(0)),), ["input"]
M["r3d_18"] = (video, "torchscript")
em.MODELS.update(M)


def export_all(models):
    """Exports the models named on the command line (all of `models` by default) to argv[1]."""
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for n in sys.argv[2:] or list(models):
        try:
            em.export(n, out)
        except Exception as e:
            print(f"{n}: EXPORT FAILED {type(e).__name__}: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    export_all(M)
