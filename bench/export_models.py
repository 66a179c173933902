"""Exports the real-model suite of the ONNX importer to ONNX files, with random weights
(fixed seed) and fixed inputs, and writes ONNX Runtime's outputs beside them:

  export_models.py OUT_DIR [NAME ...]      (names: see MODELS; default all)

gives OUT_DIR/NAME.onnx (weights inline, or in NAME.onnx.data when over 2 GB),
OUT_DIR/NAME.inputs.npz and OUT_DIR/NAME.ort.npz. Needs torch, torchvision, transformers,
onnx, onnxscript and onnxruntime from PyPI (comparison only: kiln itself never uses them).
"""
import os
import sys

import numpy as np
import onnxruntime
import torch


def torchvision_model(name, size=224, **options):
    import torchvision

    def build():
        model = getattr(torchvision.models, name)(weights=None, **options)
        if name.startswith("vit"):
            # torchvision starts ViT's classifier at zero: every output would be 0.
            torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        return model, (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0)),), ["input"]

    return build


def bert_base():
    from transformers import BertConfig, BertModel

    config = BertConfig(attn_implementation="eager")
    model = BertModel(config, add_pooling_layer=True)
    ids = torch.randint(0, config.vocab_size, (1, 128), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(1, 128, dtype=torch.int64)

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = model

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    return Wrapped(), (ids, mask), ["input_ids", "attention_mask"]


def gpt2_small():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(attn_implementation="eager", use_cache=False)
    model = GPT2LMHeadModel(config)
    ids = torch.randint(0, config.vocab_size, (1, 128), generator=torch.Generator().manual_seed(0))

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt2 = model

        def forward(self, input_ids):
            return self.gpt2(input_ids=input_ids, use_cache=False).logits

    return Wrapped(), (ids,), ["input_ids"]


class Keywords(torch.nn.Module):
    """`model` called with its inputs by name (exporters pass them by position), and
    `output` of what it returns."""

    def __init__(self, model, names, output):
        super().__init__()
        self.model, self.names, self.output = model, names, output

    def forward(self, *inputs):
        return self.output(self.model(**dict(zip(self.names, inputs))))


def keyword_model(model, inputs, output):
    """A builder's (module, inputs, names) for `model` called with `inputs` (a dict)."""
    return Keywords(model, list(inputs), output), tuple(inputs.values()), list(inputs)


def tokens(vocabulary, length, seed=0, low=0):
    return torch.randint(low, vocabulary, (1, length), generator=torch.Generator().manual_seed(seed))


def last_hidden_state(out):
    return out.last_hidden_state


def causal_lm(name, seq=128, **sizes):
    """A Hugging Face causal language model (`name`: llama, ...) with random weights, its
    logits for one sequence of `seq` tokens."""
    import transformers

    def build():
        config = transformers.AutoConfig.for_model(name, use_cache=False, **sizes)
        model = transformers.AutoModelForCausalLM.from_config(config)
        return keyword_model(model, {"input_ids": tokens(config.vocab_size, seq)}, lambda out: out.logits)

    return build


def bert_base_sdpa():
    """BERT-base as transformers builds it by default (scaled_dot_product_attention),
    its last hidden state."""
    from transformers import BertConfig, BertModel

    model = BertModel(BertConfig(), add_pooling_layer=False)
    inputs = {"input_ids": tokens(model.config.vocab_size, 128),
              "attention_mask": torch.ones(1, 128, dtype=torch.int64)}
    return keyword_model(model, inputs, last_hidden_state)


def t5_small():
    """T5-small, encoder and decoder: 64 input tokens, the logits of 16 decoder tokens."""
    from transformers import T5Config, T5ForConditionalGeneration

    model = T5ForConditionalGeneration(T5Config(use_cache=False))
    inputs = {"input_ids": tokens(model.config.vocab_size, 64),
              "decoder_input_ids": tokens(model.config.vocab_size, 16, seed=1)}
    return keyword_model(model, inputs, lambda out: out.logits)


def whisper_encoder():
    """Whisper-tiny's audio encoder (two 1-d convolutions, four layers of 6 heads over
    1500 positions): 30 s of 80 mel bins."""
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                           decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536)
    features = torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(0))
    return keyword_model(WhisperModel(config).get_encoder(), {"input_features": features}, last_hidden_state)


def roberta():
    """RoBERTa (4 layers at BERT-base's width), its last hidden state: position ids are a
    cumulative sum of its i64 padding mask."""
    from transformers import RobertaConfig, RobertaModel

    model = RobertaModel(RobertaConfig(num_hidden_layers=4), add_pooling_layer=False)
    return keyword_model(model, {"input_ids": tokens(model.config.vocab_size, 128, low=3)}, last_hidden_state)


def wav2vec2_small():
    """wav2vec 2.0 at a small width (256, 2 layers), 1 s of 16 kHz audio: seven strided 1-d
    convolutions with a group norm, then a positional convolution of 128 taps in 16 groups."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    model = Wav2Vec2Model(Wav2Vec2Config(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=1024))
    audio = torch.randn(1, 16000, generator=torch.Generator().manual_seed(0))
    return keyword_model(model, {"input_values": audio}, last_hidden_state)


def hf_vision(model_class, config_class, size=224, output=last_hidden_state, **sizes):
    """A Hugging Face vision model (by class names) with random weights, one image of size²."""
    def build():
        import transformers

        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**sizes))
        pixels = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
        return keyword_model(model, {"pixel_values": pixels}, output)

    return build


def recurrent(kind, layers=2, hidden=128):
    """A bidirectional LSTM or GRU over 64 steps of 32 features for 8 series, then a linear head."""

    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(torch.nn, kind)(32, hidden, num_layers=layers, batch_first=True, bidirectional=True)
            self.head = torch.nn.Linear(2 * hidden, 4)

        def forward(self, series):
            return self.head(self.rnn(series)[0])

    def build():
        return Recurrent(), (torch.randn(8, 64, 32, generator=torch.Generator().manual_seed(0)),), ["series"]

    return build


def unet():
    """A 3-level U-Net: 3x3 convolutions with batch norm and ReLU, max pools, transposed
    convolutions up, skip concats, on one 3x128x128 image."""
    nn = torch.nn

    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self, widths=(16, 32, 64)):
            super().__init__()
            self.down = nn.ModuleList()
            cin = 3
            for w in widths:
                self.down.append(block(cin, w))
                cin = w
            self.middle = block(widths[-1], 2 * widths[-1])
            self.up = nn.ModuleList(nn.ConvTranspose2d(2 * w, w, 2, stride=2) for w in reversed(widths))
            self.merge = nn.ModuleList(block(2 * w, w) for w in reversed(widths))
            self.out = nn.Conv2d(widths[0], 2, 1)

        def forward(self, image):
            skips = []
            x = image
            for down in self.down:
                x = down(x)
                skips.append(x)
                x = nn.functional.max_pool2d(x, 2)
            x = self.middle(x)
            for up, merge, skip in zip(self.up, self.merge, reversed(skips)):
                x = merge(torch.cat([up(x), skip], dim=1))
            return self.out(x)

    def build():
        model = UNet()
        # Batch norm's running statistics away from 0 and 1, so folding them is tested.
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
        return model, (torch.randn(1, 3, 128, 128, generator=torch.Generator().manual_seed(0)),), ["image"]

    return build


# name -> (builder, exporter): "dynamo" is torch.onnx.export(dynamo=True), the default of
# recent PyTorch; "torchscript" the older tracing exporter, which most existing files
# came from.
MODELS = {
    "resnet18": (torchvision_model("resnet18"), "torchscript"),
    "resnet50": (torchvision_model("resnet50"), "torchscript"),
    "mobilenet_v2": (torchvision_model("mobilenet_v2"), "torchscript"),
    "vit_b_16": (torchvision_model("vit_b_16"), "torchscript"),
    "bert_base": (bert_base, "torchscript"),
    "gpt2_small": (gpt2_small, "dynamo"),
}
# More image networks, whose ops and patterns the six above lack (depthwise convolutions
# with SiLU and hard swish, squeeze-and-excitation, Inception's concats and pools, dense
# blocks, window attention written as einsums and scatters).
for _name in ["efficientnet_b0", "mobilenet_v3_small", "mnasnet1_0", "shufflenet_v2_x1_0", "squeezenet1_1",
              "densenet121", "regnet_y_400mf", "resnext50_32x4d", "convnext_tiny", "maxvit_t", "swin_t"]:
    MODELS[_name] = (torchvision_model(_name), "torchscript")
# Plain stacks of 3x3 convolutions at every scale, for Winograd's (docs/cpu.md).
for _name in ["resnet34", "vgg16"]:
    MODELS[_name] = (torchvision_model(_name), "torchscript")
# Transformers as transformers builds them by default (scaled_dot_product_attention) and
# the dynamo exporter writes them: rotary embeddings, RMSNorm, grouped-query heads and
# SwiGLU (a LLaMA of 6 layers at GPT-2 small's width), relative position buckets and an
# encoder-decoder (T5), attention over 1500 positions after 1-d convolutions (Whisper),
# position ids summed from the mask (RoBERTa), a long grouped 1-d convolution (wav2vec 2.0).
MODELS["llama_small"] = (causal_lm("llama", hidden_size=768, intermediate_size=2048, num_hidden_layers=6,
                                   num_attention_heads=12, num_key_value_heads=4, vocab_size=32000), "dynamo")
MODELS["bert_base_sdpa"] = (bert_base_sdpa, "dynamo")
MODELS["t5_small"] = (t5_small, "dynamo")
MODELS["whisper_tiny_encoder"] = (whisper_encoder, "dynamo")
MODELS["roberta"] = (roberta, "dynamo")
MODELS["wav2vec2_small"] = (wav2vec2_small, "dynamo")
# Recurrent networks and a U-Net from both exporters: the tracing exporter writes ONNX
# LSTM/GRU ops, the dynamo exporter unrolls the steps into matmuls and slices.
for _exporter, _suffix in [("torchscript", "ts"), ("dynamo", "dyn")]:
    MODELS[f"lstm_{_suffix}"] = (recurrent("LSTM"), _exporter)
    MODELS[f"gru_{_suffix}"] = (recurrent("GRU"), _exporter)
    MODELS[f"unet_{_suffix}"] = (unet(), _exporter)
# Vision transformers whose patches go between [C, H, W] and tokens (transposes of the
# last two dims inside kernels: SegFormer's Mix-FFN, four stages at small widths), and
# BEiT's relative-position bias, whose index the exporter builds from scatters of aranges.
MODELS["segformer"] = (hf_vision("SegformerModel", "SegformerConfig", 128, depths=[1, 1, 1, 1],
                                 hidden_sizes=[32, 64, 160, 256]), "dynamo")
MODELS["beit"] = (hf_vision("BeitModel", "BeitConfig", hidden_size=256, intermediate_size=1024, num_hidden_layers=2,
                            num_attention_heads=4, use_relative_position_bias=True), "dynamo")
MODELS["googlenet"] = (torchvision_model("googlenet", aux_logits=False, init_weights=True), "torchscript")
MODELS["inception_v3"] = (torchvision_model("inception_v3", 299, aux_logits=False, init_weights=True), "torchscript")


def export(name, out_dir):
    build, exporter = MODELS[name]
    torch.manual_seed(0)
    model, inputs, input_names = build()
    model.eval()
    # nn.MultiheadAttention's inference fast path is one fused aten op no exporter knows.
    torch.backends.mha.set_fastpath_enabled(False)
    path = os.path.join(out_dir, f"{name}.onnx")
    with torch.no_grad():
        if exporter == "dynamo":
            program = torch.onnx.export(model, inputs, dynamo=True, input_names=input_names)
            program.save(path)
        else:
            torch.onnx.export(model, inputs, path, dynamo=False, input_names=input_names, opset_version=17)
    feeds = {n: t.numpy() for n, t in zip(input_names, inputs)}
    np.savez(os.path.join(out_dir, f"{name}.inputs.npz"), **feeds)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    outputs = session.run(None, feeds)
    names = [o.name for o in session.get_outputs()]
    np.savez(os.path.join(out_dir, f"{name}.ort.npz"), **dict(zip(names, outputs)))
    print(f"{name}: {path} ({os.path.getsize(path) / 1e6:.1f} MB), inputs "
          + ", ".join(f"{n}{list(v.shape)}" for n, v in feeds.items())
          + ", outputs " + ", ".join(f"{n}{list(v.shape)}" for n, v in zip(names, outputs)))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    names = sys.argv[2:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"unknown model {', '.join(unknown)}; known: {', '.join(MODELS)}")
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        export(name, out_dir)


if __name__ == "__main__":
    main()
