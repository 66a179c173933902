import sys, torch
sys.path.insert(0, "/work/main/bench")
import export_models as em
import transformers as tf

def hf(make, inputs, out=lambda o: o.last_hidden_state):
    def build():
        torch.manual_seed(0)
        model = make()
        ins = inputs(model.config)
        names = list(ins)
        class W(torch.nn.Module):
            def __init__(self):
                super().__init__(); self.m = model
            def forward(self, *args):
                return out(self.m(**dict(zip(names, args))))
        return W(), tuple(ins.values()), names
    return build

g = lambda s: torch.Generator().manual_seed(s)
ids = lambda c, n=128: {"input_ids": torch.randint(0, c.vocab_size, (1, n), generator=g(0))}
lm = lambda o: o.logits

em.MODELS.update({
 "deeplabv3_mbv3": (em.torchvision_model("deeplabv3_mobilenet_v3_large", 256) if False else None, "torchscript"),
})
def seg(name, size=256):
    import torchvision
    def build():
        m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, aux_loss=False)
        class W(torch.nn.Module):
            def __init__(self):
                super().__init__(); self.m = m
            def forward(self, x):
                return self.m(x)["out"]
        return W(), (torch.randn(1, 3, size, size, generator=g(0)),), ["input"]
    return build
em.MODELS["deeplabv3_mbv3"] = (seg("deeplabv3_mobilenet_v3_large"), "torchscript")
em.MODELS["lraspp_mbv3"] = (seg("lraspp_mobilenet_v3_large"), "torchscript")
em.MODELS["fcn_resnet50"] = (seg("fcn_resnet50"), "torchscript")
em.MODELS["qwen2_tiny"] = (hf(lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, vocab_size=16000, use_cache=False)), ids, lm), "dynamo")
em.MODELS["gemma_tiny"] = (hf(lambda: tf.GemmaForCausalLM(tf.GemmaConfig(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=1, head_dim=64, vocab_size=16000, use_cache=False)), ids, lm), "dynamo")
em.MODELS["phi3_tiny"] = (hf(lambda: tf.Phi3ForCausalLM(tf.Phi3Config(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8, vocab_size=16000, use_cache=False, pad_token_id=0)), ids, lm), "dynamo")
em.MODELS["distilbert"] = (hf(lambda: tf.DistilBertModel(tf.DistilBertConfig()), ids), "dynamo")
em.MODELS["roberta"] = (hf(lambda: tf.RobertaModel(tf.RobertaConfig(num_hidden_layers=4), add_pooling_layer=False), lambda c: {"input_ids": torch.randint(3, c.vocab_size, (1, 128), generator=g(0))}), "dynamo")
em.MODELS["bart_small"] = (hf(lambda: tf.BartForConditionalGeneration(tf.BartConfig(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024, vocab_size=8000, use_cache=False)), lambda c: {"input_ids": torch.randint(3, c.vocab_size, (1, 64), generator=g(0)), "decoder_input_ids": torch.randint(3, c.vocab_size, (1, 16), generator=g(1))}, lm), "dynamo")
em.MODELS["wav2vec2_small"] = (hf(lambda: tf.Wav2Vec2Model(tf.Wav2Vec2Config(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024)), lambda c: {"input_values": torch.randn(1, 16000, generator=g(0))}), "dynamo")
em.MODELS["clip_vision"] = (hf(lambda: tf.CLIPVisionModel(tf.CLIPVisionConfig()), lambda c: {"pixel_values": torch.randn(1, 3, 224, 224, generator=g(0))}), "dynamo")
em.MODELS["mobilevit"] = (hf(lambda: tf.MobileViTModel(tf.MobileViTConfig()), lambda c: {"pixel_values": torch.randn(1, 3, 256, 256, generator=g(0))}), "dynamo")
em.MODELS["deit_small"] = (hf(lambda: tf.ViTModel(tf.ViTConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536)), lambda c: {"pixel_values": torch.randn(1, 3, 224, 224, generator=g(0))}), "dynamo")
if __name__ == "__main__":
    em.main()
