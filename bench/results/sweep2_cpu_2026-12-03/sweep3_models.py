"""A third sweep (more Hugging Face decoders, encoder-decoders and vision backbones):
sweep3_models.py OUT_DIR [NAME ...]."""
import os, sys, torch
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../.."))
sys.path.insert(0, os.path.join(here, "../tiled_loops_cpu_2026-12-03"))
import export_models as em
from export_models import keyword_model, tokens, last_hidden_state, causal_lm
from sweep_models import hf, ids, pixels, export_all
from sweep2_models import seq2seq, s2s, tiny, audio

M = {}
M["gemma2"] = (causal_lm("gemma2", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64, vocab_size=4000), "dynamo")
M["qwen3"] = (causal_lm("qwen3", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64, vocab_size=4000), "dynamo")
M["starcoder2"] = (causal_lm("starcoder2", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=4000), "dynamo")
M["granite"] = (causal_lm("granite", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=4000), "dynamo")
M["cohere"] = (causal_lm("cohere", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=4000), "dynamo")
M["mixtral"] = (causal_lm("mixtral", hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, vocab_size=4000), "dynamo")
M["gpt2_dyn"] = (causal_lm("gpt2", n_embd=256, n_layer=2, n_head=4, vocab_size=4000), "dynamo")
M["roformer"] = (hf("RoFormerModel", "RoFormerConfig", ids(), vocab_size=4000, embedding_size=256, **tiny), "dynamo")
M["rembert"] = (hf("RemBertModel", "RemBertConfig", ids(), vocab_size=4000, input_embedding_size=128, output_embedding_size=128, **tiny), "dynamo")
M["canine"] = (hf("CanineModel", "CanineConfig", lambda c: {"input_ids": tokens(1000, 64)}, **tiny), "dynamo")
M["nystromformer"] = (hf("NystromformerModel", "NystromformerConfig", ids(), vocab_size=4000, num_landmarks=16, segment_means_seq_len=64, **tiny), "dynamo")
M["m2m100"] = (seq2seq("M2M100Model", "M2M100Config", **s2s), "dynamo")
M["blenderbot"] = (seq2seq("BlenderbotModel", "BlenderbotConfig", **s2s), "dynamo")
M["whisper"] = (lambda: keyword_model(__import__("transformers").WhisperModel(__import__("transformers").WhisperConfig(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, vocab_size=4000, max_source_positions=1500, use_cache=False)), {"input_features": torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(0)), "decoder_input_ids": tokens(4000, 8, low=3)}, lambda o: o.last_hidden_state), "dynamo")
M["speech2text"] = (lambda: keyword_model(__import__("transformers").Speech2TextModel(__import__("transformers").Speech2TextConfig(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256, vocab_size=4000, use_cache=False)), {"input_features": torch.randn(1, 200, 80, generator=torch.Generator().manual_seed(0)), "decoder_input_ids": tokens(4000, 8, low=3)}, lambda o: o.last_hidden_state), "dynamo")
M["siglip_vision"] = (hf("SiglipVisionModel", "SiglipVisionConfig", pixels(), output=lambda o: o.pooler_output, hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4, patch_size=16), "dynamo")
M["resnet_hf"] = (hf("ResNetModel", "ResNetConfig", pixels(), output=lambda o: o.pooler_output, depths=[1, 1, 1, 1]), "dynamo")
M["regnet_hf"] = (hf("RegNetModel", "RegNetConfig", pixels(), output=lambda o: o.pooler_output, depths=[1, 1, 1, 1]), "dynamo")
M["mobilenet_v1_hf"] = (hf("MobileNetV1Model", "MobileNetV1Config", pixels(), output=lambda o: o.pooler_output), "dynamo")
M["mobilenet_v2_hf"] = (hf("MobileNetV2Model", "MobileNetV2Config", pixels(), output=lambda o: o.pooler_output), "dynamo")
M["efficientnet_hf"] = (hf("EfficientNetModel", "EfficientNetConfig", pixels(), output=lambda o: o.pooler_output), "dynamo")
M["van"] = (hf("VanModel", "VanConfig", pixels(), output=lambda o: o.pooler_output, depths=[1, 1, 1, 1]), "dynamo")
M["hiera"] = (hf("HieraModel", "HieraConfig", pixels(), output=lambda o: o.pooler_output, depths=[1, 1, 1, 1]), "dynamo")
M["swiftformer"] = (hf("SwiftFormerModel", "SwiftFormerConfig", pixels(), depths=[1, 1, 1, 1]), "dynamo")
M["clap_audio"] = (hf("ClapAudioModel", "ClapAudioConfig", lambda c: {"input_features": torch.randn(1, 1, 1001, 64, generator=torch.Generator().manual_seed(0))}, output=lambda o: o.pooler_output, depths=[1, 1, 1, 1]), "dynamo")
M["unispeech"] = (hf("UniSpeechModel", "UniSpeechConfig", audio(), **tiny), "dynamo")
em.MODELS.update(M)
if __name__ == "__main__":
    export_all(M)
