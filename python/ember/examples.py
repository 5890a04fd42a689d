"""Built-in example models for tests, benchmarks and demos.

Each builder returns ``(model, example_inputs)``: an fp32 CPU model in eval mode and a tuple of
inputs for it. Builders seed torch themselves, so two calls give the same weights and inputs.
Nothing is downloaded; ``tiny_gpt2`` needs ``transformers`` installed, and the larger
models (``LARGER_MODELS``) need ``transformers``, ``torchvision`` or ``timm``.
"""
import torch
import torch.nn as nn


def mlp():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(256, 512), nn.GELU(),
        nn.Linear(512, 256), nn.ReLU(),
        nn.Linear(256, 10),
    )
    return model.eval(), (torch.randn(32, 256),)


class LayerNormGeluBlock(nn.Module):
    """A pre-norm transformer MLP block: the pointwise + reduction pattern fusion targets."""

    def __init__(self, width=256, hidden=1024):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, hidden)
        self.act = nn.GELU(approximate="tanh")
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


def ln_gelu_block():
    torch.manual_seed(0)
    model = LayerNormGeluBlock()
    return model.eval(), (torch.randn(8, 64, 256),)


class LogitsOnly(nn.Module):
    """Wraps a Hugging Face causal LM so that forward returns a plain logits tensor."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids):
        return self.lm(input_ids=input_ids, use_cache=False).logits


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    vocab = 4096
    # GPT-2's default special tokens (50256) lie outside this small vocabulary.
    config = GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=vocab,
                        bos_token_id=vocab - 1, eos_token_id=vocab - 1, use_cache=False)
    model = LogitsOnly(GPT2LMHeadModel(config))
    return model.eval(), (torch.randint(0, vocab, (4, 128)),)


def _llama(hidden, layers, heads, kv_heads, intermediate, vocab):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=2048, use_cache=False)
    return LogitsOnly(LlamaForCausalLM(config)).eval()


def tiny_llama():
    """A Llama-style decoder (RMSNorm, rotary embeddings, grouped-query attention, SwiGLU):
    2 layers, 256 wide, 4 query and 2 key/value heads."""
    return _llama(256, 2, 4, 2, 688, 4096), (torch.randint(0, 4096, (4, 128)),)


def _randomize_batch_norm(bn):
    # Fresh BatchNorm has mean 0, var 1, weight 1, bias 0, which makes eval-mode BN the
    # identity and would hide a wrong lowering.
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)


def small_cnn():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(32, 10),
    )
    for layer in model:
        if isinstance(layer, nn.BatchNorm2d):
            _randomize_batch_norm(layer)
    return model.eval(), (torch.randn(8, 3, 32, 32),)


MODELS = {
    "mlp": mlp,
    "ln_gelu": ln_gelu_block,
    "tiny_gpt2": tiny_gpt2,
    "small_cnn": small_cnn,
    "tiny_llama": tiny_llama,
}


# Larger models for `ember bench`: real architectures at their usual sizes, with random
# weights (built from a config, never downloaded). Each needs its package installed.

def gpt2():
    """GPT-2 small (124M), batch 1 x 128 tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = LogitsOnly(GPT2LMHeadModel(GPT2Config(use_cache=False)))
    return model.eval(), (torch.randint(0, 50257, (1, 128)),)


class HiddenStatesOnly(nn.Module):
    """Wraps a Hugging Face encoder so that forward returns its last hidden states."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids):
        return self.encoder(input_ids=input_ids).last_hidden_state


def bert():
    """BERT-base (110M), batch 1 x 128 tokens."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    model = HiddenStatesOnly(BertModel(BertConfig(), add_pooling_layer=False))
    return model.eval(), (torch.randint(0, 30522, (1, 128)),)


def resnet50():
    """torchvision's ResNet-50, batch 1 x 3 x 224 x 224."""
    import torchvision

    torch.manual_seed(0)
    return torchvision.models.resnet50(weights=None).eval(), (torch.randn(1, 3, 224, 224),)


def vit_small():
    """timm's ViT-S/16, batch 1 x 3 x 224 x 224."""
    import timm

    torch.manual_seed(0)
    return timm.create_model("vit_small_patch16_224", pretrained=False).eval(), (torch.randn(1, 3, 224, 224),)


def llama():
    """A Llama-style decoder at TinyLlama-1.1B's widths (2048 wide, 32 query and 4 key/value
    heads, SwiGLU 5632) with 8 of its 22 layers, batch 1 x 128 tokens."""
    return _llama(2048, 8, 32, 4, 5632, 32000), (torch.randint(0, 32000, (1, 128)),)


LARGER_MODELS = {
    "gpt2": gpt2,
    "bert": bert,
    "resnet50": resnet50,
    "vit_small": vit_small,
    "llama": llama,
}


def get(name):
    """Return ``(model, example_inputs)`` for a model in ``MODELS`` or ``LARGER_MODELS``."""
    builder = MODELS.get(name) or LARGER_MODELS.get(name)
    if builder is None:
        known = ", ".join(list(MODELS) + list(LARGER_MODELS))
        raise KeyError(f"unknown example model {name!r}; known: {known}")
    return builder()
