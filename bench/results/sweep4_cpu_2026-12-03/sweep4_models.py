"""A fourth sweep (mixture-of-experts and state-space decoders, long-sequence and FFT
encoders, detection transformers, super-resolution, vocoders, time-series models, more
torchvision classifiers and optical flow): sweep4_models.py OUT_DIR [NAME ...]."""
import os, sys, torch
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../.."))
sys.path.insert(0, os.path.join(here, "../tiled_loops_cpu_2026-12-03"))
sys.path.insert(0, os.path.join(here, "../sweep2_cpu_2026-12-03"))
import export_models as em
from export_models import keyword_model, tokens, last_hidden_state, causal_lm, torchvision_model
from sweep_models import hf, ids, pixels, export_all
from sweep2_models import seq2seq, s2s, tiny, audio

def gen(seed=0):
    return torch.Generator().manual_seed(seed)

M = {}
lm = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, vocab_size=4000)
M["phi3"] = (causal_lm("phi3", num_key_value_heads=2, pad_token_id=0, **lm), "dynamo")
M["olmoe"] = (causal_lm("olmoe", num_experts=4, num_experts_per_tok=2, **lm), "dynamo")
M["qwen2_moe"] = (causal_lm("qwen2_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=256, shared_expert_intermediate_size=512, **lm), "dynamo")
M["nemotron"] = (causal_lm("nemotron", num_key_value_heads=2, **lm), "dynamo")
M["persimmon"] = (causal_lm("persimmon", **lm), "dynamo")
M["gpt_neo"] = (causal_lm("gpt_neo", hidden_size=256, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]], window_size=32, vocab_size=4000), "dynamo")
M["mpt"] = (causal_lm("mpt", d_model=256, n_layers=2, n_heads=4, vocab_size=4000), "dynamo")
M["mamba2"] = (causal_lm("mamba2", hidden_size=256, num_hidden_layers=2, num_heads=8, head_dim=64, state_size=16, n_groups=1, vocab_size=4000, chunk_size=64), "dynamo")
M["falcon_mamba"] = (causal_lm("falcon_mamba", hidden_size=256, num_hidden_layers=2, state_size=16, vocab_size=4000), "dynamo")
M["recurrent_gemma"] = (causal_lm("recurrent_gemma", hidden_size=256, intermediate_size=512, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, lru_width=256, attention_window_size=64, vocab_size=4000), "dynamo")
M["jamba"] = (causal_lm("jamba", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1, mamba_d_state=16, mamba_expand=2, vocab_size=4000, use_mamba_kernels=False), "dynamo")
M["rwkv"] = (hf("RwkvModel", "RwkvConfig", ids(), hidden_size=256, num_hidden_layers=2, attention_hidden_size=256, intermediate_size=512, vocab_size=4000, context_length=128), "dynamo")
M["fnet"] = (hf("FNetModel", "FNetConfig", ids(), vocab_size=4000, **tiny), "dynamo")
M["longformer"] = (hf("LongformerModel", "LongformerConfig", ids(128, low=3), vocab_size=4000, attention_window=32, **tiny), "dynamo")
M["big_bird"] = (hf("BigBirdModel", "BigBirdConfig", ids(64), vocab_size=4000, attention_type="original_full", **tiny), "dynamo")
M["mobilebert"] = (hf("MobileBertModel", "MobileBertConfig", ids(), vocab_size=4000, num_hidden_layers=2), "dynamo")
M["esm"] = (hf("EsmModel", "EsmConfig", lambda c: {"input_ids": tokens(33, 64, low=4)}, vocab_size=33, position_embedding_type="rotary", pad_token_id=1, **tiny), "dynamo")
M["xlm"] = (hf("XLMModel", "XLMConfig", ids(), vocab_size=4000, emb_dim=256, n_layers=2, n_heads=4), "dynamo")
M["led"] = (seq2seq("LEDModel", "LEDConfig", attention_window=16, max_encoder_position_embeddings=256, max_decoder_position_embeddings=256, **s2s), "dynamo")
M["prophetnet"] = (lambda: keyword_model(__import__("transformers").ProphetNetModel(__import__("transformers").ProphetNetConfig(vocab_size=4000, hidden_size=256, encoder_ffn_dim=512, decoder_ffn_dim=512, num_encoder_layers=2, num_decoder_layers=2, num_encoder_attention_heads=4, num_decoder_attention_heads=4, ngram=2, use_cache=False)), {"input_ids": tokens(4000, 32, low=3), "decoder_input_ids": tokens(4000, 8, seed=1, low=3)}, lambda o: o.last_hidden_state), "dynamo")
M["longt5"] = (seq2seq("LongT5Model", "LongT5Config", vocab_size=4000, d_model=256, d_ff=512, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=64, local_radius=8, encoder_attention_type="transient-global", global_block_size=8, use_cache=False), "dynamo")
M["switch"] = (seq2seq("SwitchTransformersModel", "SwitchTransformersConfig", vocab_size=4000, d_model=256, d_ff=512, num_layers=2, num_decoder_layers=2, num_heads=4, d_kv=64, num_experts=4, encoder_sparse_step=1, decoder_sparse_step=1, use_cache=False), "dynamo")
M["mbart"] = (seq2seq("MBartModel", "MBartConfig", **s2s), "dynamo")
M["fsmt"] = (lambda: keyword_model(__import__("transformers").FSMTModel(__import__("transformers").FSMTConfig(langs=["en", "de"], src_vocab_size=4000, tgt_vocab_size=4000, d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, use_cache=False)), {"input_ids": tokens(4000, 32, low=3), "decoder_input_ids": tokens(4000, 8, seed=1, low=3)}, lambda o: o.last_hidden_state), "dynamo")
M["convnext_hf"] = (hf("ConvNextModel", "ConvNextConfig", pixels(), output=lambda o: o.pooler_output, depths=[1, 1, 1, 1], hidden_sizes=[32, 64, 128, 256]), "dynamo")
M["swin_hf"] = (hf("SwinModel", "SwinConfig", pixels(), embed_dim=32, depths=[1, 1, 1, 1], num_heads=[1, 2, 4, 8]), "dynamo")
M["data2vec_vision"] = (hf("Data2VecVisionModel", "Data2VecVisionConfig", pixels(), use_relative_position_bias=True, **tiny), "dynamo")
M["vitdet"] = (hf("VitDetModel", "VitDetConfig", pixels(), window_size=7, window_block_indices=[0], use_relative_position_embeddings=True, out_features=["stage2"], hidden_size=256, num_hidden_layers=2, num_attention_heads=4), "dynamo")
M["detr"] = (hf("DetrModel", "DetrConfig", pixels(256), use_timm_backbone=False, use_pretrained_backbone=False, backbone="resnet-50", backbone_config={"model_type": "resnet", "depths": [1, 1, 1, 1], "out_features": ["stage4"]}, d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, num_queries=20), "dynamo")
M["deformable_detr"] = (hf("DeformableDetrModel", "DeformableDetrConfig", pixels(256), use_timm_backbone=False, use_pretrained_backbone=False, backbone=None, backbone_config={"model_type": "resnet", "depths": [1, 1, 1, 1], "out_features": ["stage2", "stage3", "stage4"]}, d_model=128, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, num_queries=20), "dynamo")
M["swin2sr"] = (hf("Swin2SRForImageSuperResolution", "Swin2SRConfig", pixels(64), output=lambda o: o.reconstruction, embed_dim=60, depths=[2, 2], num_heads=[6, 6], window_size=8, upscale=2, upsampler="pixelshuffledirect"), "dynamo")
M["depth_anything"] = (hf("DepthAnythingForDepthEstimation", "DepthAnythingConfig", pixels(112), output=lambda o: o.predicted_depth, backbone_config={"model_type": "dinov2", "hidden_size": 192, "num_hidden_layers": 4, "num_attention_heads": 3, "image_size": 112, "out_indices": [1, 2, 3, 4], "reshape_hidden_states": False}, neck_hidden_sizes=[24, 48, 96, 192], fusion_hidden_size=32), "dynamo")
M["superpoint"] = (hf("SuperPointForKeypointDetection", "SuperPointConfig", lambda c: {"pixel_values": torch.randn(1, 3, 120, 160, generator=gen())}, output=lambda o: o.descriptors), "dynamo")
M["imagegpt"] = (hf("ImageGPTModel", "ImageGPTConfig", lambda c: {"input_ids": tokens(512, 64)}, vocab_size=513, n_positions=64, n_embd=256, n_layer=2, n_head=4), "dynamo")
M["wav2vec2_conformer"] = (hf("Wav2Vec2ConformerModel", "Wav2Vec2ConformerConfig", audio(), position_embeddings_type="rotary", **tiny), "dynamo")
M["sew_d"] = (hf("SEWDModel", "SEWDConfig", audio(), **tiny), "dynamo")
M["encodec"] = (hf("EncodecModel", "EncodecConfig", lambda c: {"input_values": torch.randn(1, 1, 4800, generator=gen())}, output=lambda o: o.audio_values), "dynamo")
M["hifigan"] = (lambda: keyword_model(__import__("transformers").SpeechT5HifiGan(__import__("transformers").SpeechT5HifiGanConfig()), {"spectrogram": torch.randn(1, 40, 80, generator=gen())}, lambda o: o), "dynamo")
M["univnet"] = (lambda: keyword_model(__import__("transformers").UnivNetModel(__import__("transformers").UnivNetConfig()), {"input_features": torch.randn(1, 40, 100, generator=gen()), "noise_sequence": torch.randn(1, 40, 64, generator=gen(1))}, lambda o: o.waveforms), "dynamo")
M["patchtst"] = (hf("PatchTSTModel", "PatchTSTConfig", lambda c: {"past_values": torch.randn(1, 512, 7, generator=gen())}, num_input_channels=7, context_length=512, patch_length=16, patch_stride=8, d_model=128, num_hidden_layers=2, num_attention_heads=4, ffn_dim=256), "dynamo")
M["patchtsmixer"] = (hf("PatchTSMixerModel", "PatchTSMixerConfig", lambda c: {"past_values": torch.randn(1, 512, 7, generator=gen())}, num_input_channels=7, context_length=512, patch_length=16, patch_stride=8, d_model=64, num_layers=2), "dynamo")
for name, size, exporter in [("maxvit_t", 224, "dynamo"), ("convnext_tiny", 224, "dynamo"), ("efficientnet_b0", 224, "dynamo"),
                             ("swin_t", 224, "dynamo"), ("regnet_x_400mf", 224, "dynamo"), ("wide_resnet50_2", 224, "torchscript"),
                             ("mobilenet_v3_small", 224, "torchscript"), ("shufflenet_v2_x0_5", 224, "torchscript")]:
    M[name] = (torchvision_model(name, size), exporter)
def raft():
    import torchvision
    m = torchvision.models.optical_flow.raft_small(weights=None, num_flow_updates=4)
    class W(torch.nn.Module):
        def __init__(s): super().__init__(); s.m = m
        def forward(s, a, b): return s.m(a, b)[-1]
    return W(), (torch.randn(1, 3, 128, 128, generator=gen()), torch.randn(1, 3, 128, 128, generator=gen(1))), ["image1", "image2"]
M["raft_small"] = (raft, "dynamo")
em.MODELS.update(M)
if __name__ == "__main__":
    export_all(M)
