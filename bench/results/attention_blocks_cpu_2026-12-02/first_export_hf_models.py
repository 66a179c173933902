import sys, torch
sys.path.insert(0, "/work/main/bench")
import export_models as em

def causal_lm(config_cls, model_cls, seq=128, **cfg):
    def build():
        config = config_cls(use_cache=False, **cfg)
        model = model_cls(config)
        ids = torch.randint(0, config.vocab_size, (1, seq), generator=torch.Generator().manual_seed(0))
        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__(); self.m = model
            def forward(self, input_ids):
                return self.m(input_ids=input_ids, use_cache=False).logits
        return Wrapped(), (ids,), ["input_ids"]
    return build

def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return causal_lm(LlamaConfig, LlamaForCausalLM, hidden_size=768, intermediate_size=2048, num_hidden_layers=6,
                     num_attention_heads=12, num_key_value_heads=4, vocab_size=32000)()

def bert_sdpa():
    from transformers import BertConfig, BertModel
    config = BertConfig()
    model = BertModel(config)
    ids = torch.randint(0, config.vocab_size, (1, 128), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(1, 128, dtype=torch.int64)
    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__(); self.bert = model
        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return Wrapped(), (ids, mask), ["input_ids", "attention_mask"]

def t5_small():
    from transformers import T5Config, T5ForConditionalGeneration
    config = T5Config(use_cache=False)
    model = T5ForConditionalGeneration(config)
    ids = torch.randint(0, config.vocab_size, (1, 64), generator=torch.Generator().manual_seed(0))
    dec = torch.randint(0, config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(1))
    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__(); self.m = model
        def forward(self, input_ids, decoder_input_ids):
            return self.m(input_ids=input_ids, decoder_input_ids=decoder_input_ids, use_cache=False).logits
    return Wrapped(), (ids, dec), ["input_ids", "decoder_input_ids"]

def whisper_encoder():
    from transformers import WhisperConfig, WhisperModel
    config = WhisperConfig(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6, decoder_attention_heads=6,
                           encoder_ffn_dim=1536, decoder_ffn_dim=1536)
    model = WhisperModel(config).get_encoder()
    feats = torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(0))
    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__(); self.m = model
        def forward(self, input_features):
            return self.m(input_features=input_features).last_hidden_state
    return Wrapped(), (feats,), ["input_features"]

em.MODELS.update({
  "llama_dyn": (llama, "dynamo"),
  "bert_sdpa_dyn": (bert_sdpa, "dynamo"),
  "t5_small_dyn": (t5_small, "dynamo"),
  "whisper_enc_dyn": (whisper_encoder, "dynamo"),
  "resnet18_dyn": (em.torchvision_model("resnet18"), "dynamo"),
})
if __name__ == "__main__":
    em.main()
