"""transformers models of the suite: configs only (random weights, no hub), written against
what transformers 5.17 and 5.23 both accept (config classes and model classes built from
configs).

"full" configurations keep each architecture's real widths, heads, head dims, vocabularies
and attention variants, with fewer layers where a 7B model would not fit the GPU's memory
or the device time (a layer repeats: what it costs per layer, and what ember does with it,
is measured all the same). "small" ones are the CPU suite's: two layers, narrow, vocabulary
of 1000, batch 2.
"""
from __future__ import annotations

from .registry import Model, register

VOCAB_SMALL = 1000


def _transformers():
    """transformers, imported after the suite's torchvision fix-up where torchvision is
    installed (transformers imports it; models_vision._import_torchvision says why)."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        from .models_vision import _import_torchvision

        _import_torchvision()
    import transformers

    return transformers


def _no_dropout(cfg):
    """Every dropout (and layer drop) probability of a config, sub-configs included, set to
    0: a training step must be comparable with eager's and the fp64 reference's."""
    from transformers import PretrainedConfig

    for key, value in list(vars(cfg).items()):
        if isinstance(value, PretrainedConfig):
            _no_dropout(value)
        elif "drop" in key and isinstance(value, float) and not key.startswith("_"):
            setattr(cfg, key, 0.0)
    return cfg


def _build(class_name: str, cfg, device, dtype):
    import torch
    transformers = _transformers()

    torch.manual_seed(0)
    with torch.device(device):
        model = getattr(transformers, class_name)(_no_dropout(cfg))
    return model.to(dtype)


def _ids(vocab: int, batch: int, seq: int, device):
    import torch

    return torch.randint(0, vocab, (batch, seq), device=device)


def _padding_mask(batch: int, seq: int, device):
    """An attention mask with padding: the second half of the batch has its last eighth of
    positions padded (serving batches of unequal lengths)."""
    import torch

    mask = torch.ones(batch, seq, dtype=torch.long, device=device)
    mask[batch // 2:, seq - seq // 8:] = 0
    return mask


# ----------------------------------------------------------------------------- decoder LMs

def _decoder(name, config_class, model_class, full: dict, small: dict, shape=(8, 512), train=False,
             weight=1.0, note=""):
    """A causal LM (logits out) on input_ids of (batch, seq), with inputs for any shape."""
    small = {"vocab_size": VOCAB_SMALL, **small}

    def kwargs(size):
        return full if size == "full" else small

    def dynamic_inputs(batch, seq, device, size="full"):
        return {"input_ids": _ids(kwargs(size)["vocab_size"], batch, seq, device)}

    def build(device, dtype, size="full"):
        transformers = _transformers()

        cfg = getattr(transformers, config_class)(use_cache=False, **kwargs(size))
        model = _build(model_class, cfg, device, dtype)
        batch, seq = shape if size == "full" else (2, 64)
        return model, dynamic_inputs(batch, seq, device, size)

    register(Model(name, "decoder", "transformers", build, train=train, dynamic_inputs=dynamic_inputs,
                   weight=weight, note=note))


_SMALL = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=344)

_decoder("gpt2", "GPT2Config", "GPT2LMHeadModel",
         full=dict(vocab_size=50257),  # GPT-2 124M
         small=dict(n_layer=2, n_embd=128, n_head=4, n_positions=256, bos_token_id=1, eos_token_id=2),
         train=True, note="learned positions, fused QKV (Conv1D), GELU-tanh; the anchor workload")
_decoder("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM",
         full=dict(vocab_size=50304, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                   intermediate_size=3072, rotary_pct=0.25, max_position_embeddings=2048),  # Pythia-160M
         small=dict(_SMALL, intermediate_size=512, rotary_pct=0.25),
         note="partial rotary (25% of head dims), parallel residual")
_decoder("opt", "OPTConfig", "OPTForCausalLM",
         full=dict(vocab_size=50272, hidden_size=768, num_hidden_layers=12, ffn_dim=3072, num_attention_heads=12,
                   max_position_embeddings=2048, word_embed_proj_dim=768),  # OPT-125M
         small=dict(hidden_size=128, num_hidden_layers=2, ffn_dim=512, num_attention_heads=4, word_embed_proj_dim=128),
         note="learned positions with an offset, ReLU MLP")
_decoder("bloom", "BloomConfig", "BloomForCausalLM",
         full=dict(vocab_size=250880, hidden_size=1024, n_layer=12, n_head=16), shape=(4, 512),  # BLOOM-560M widths
         small=dict(hidden_size=128, n_layer=2, n_head=4),
         weight=1.3, note="ALiBi bias built per call, a 250k vocabulary")
_decoder("falcon", "FalconConfig", "FalconForCausalLM",
         full=dict(vocab_size=65024, hidden_size=4544, num_hidden_layers=4, num_attention_heads=71, multi_query=True,
                   parallel_attn=True, bias=False, alibi=False, new_decoder_architecture=False),  # Falcon-7B widths
         small=dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, multi_query=True,
                    parallel_attn=True, bias=False, alibi=False, new_decoder_architecture=False),
         shape=(4, 512), weight=1.2, note="multi-query attention (71 heads, 1 KV head), parallel attention + MLP")
_decoder("llama", "LlamaConfig", "LlamaForCausalLM",
         full=dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                   num_attention_heads=32, num_key_value_heads=4),  # TinyLlama-1.1B widths
         small=dict(_SMALL, num_key_value_heads=2),
         train=True, weight=1.3, note="RoPE, GQA (8 query heads per KV head), RMSNorm, SwiGLU")
_decoder("mistral", "MistralConfig", "MistralForCausalLM",
         full=dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=2,
                   num_attention_heads=32, num_key_value_heads=8, sliding_window=512),  # Mistral-7B widths
         small=dict(_SMALL, num_key_value_heads=2, sliding_window=32),
         shape=(4, 1024), weight=1.1, note="sliding-window attention (window 512 < sequence 1024), GQA")
_decoder("qwen2", "Qwen2Config", "Qwen2ForCausalLM",
         full=dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=6,
                   num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True),  # Qwen2-1.5B widths
         small=dict(_SMALL, num_key_value_heads=2, tie_word_embeddings=True),
         shape=(4, 512), weight=1.2, note="QKV bias, GQA 6:1, a 152k vocabulary")
_decoder("gemma", "GemmaConfig", "GemmaForCausalLM",
         full=dict(vocab_size=256000, hidden_size=2048, intermediate_size=16384, num_hidden_layers=4,
                   num_attention_heads=8, num_key_value_heads=1, head_dim=256),  # Gemma-2B widths
         small=dict(_SMALL, num_key_value_heads=1, head_dim=32),
         shape=(4, 512), weight=1.2, note="multi-query, head dim 256, GeGLU, scaled embeddings, (1 + w) RMSNorm")
_decoder("phi", "PhiConfig", "PhiForCausalLM",
         full=dict(vocab_size=51200, hidden_size=2560, intermediate_size=10240, num_hidden_layers=6,
                   num_attention_heads=32, partial_rotary_factor=0.4),  # Phi-2 widths
         small=dict(_SMALL, partial_rotary_factor=0.4),
         shape=(4, 512), weight=1.1, note="partial rotary (40%), parallel attention + MLP, LayerNorm")
_decoder("mixtral", "MixtralConfig", "MixtralForCausalLM",
         full=dict(vocab_size=32000, hidden_size=1024, intermediate_size=3584, num_hidden_layers=4,
                   num_attention_heads=16, num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2),
         small=dict(_SMALL, intermediate_size=256, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
         shape=(4, 512), weight=1.4, note="mixture of experts: top-2 of 8 routed experts (transformers' default "
                                          "experts implementation)")


# ----------------------------------------------------------------------------- encoders

def _encoder(name, config_class, model_class, full: dict, small: dict, inputs="ids", shape=(16, 512),
             train=False, weight=1.0, dynamic=False, note=""):
    """inputs: "ids" (input_ids only), "mask" (with a padding attention_mask), "types"
    (with token_type_ids)."""
    def vocab(size):
        return full.get("vocab_size", 30522) if size == "full" else VOCAB_SMALL

    def make_inputs(batch, seq, device, size="full"):
        import torch

        d = {"input_ids": _ids(vocab(size), batch, seq, device)}
        if inputs == "mask":
            d["attention_mask"] = _padding_mask(batch, seq, device)
        if inputs == "types":
            d["token_type_ids"] = (torch.arange(seq, device=device) >= seq // 2).long().expand(batch, seq)
        return d

    def build(device, dtype, size="full"):
        transformers = _transformers()

        kw = full if size == "full" else {"vocab_size": VOCAB_SMALL, **small}
        model = _build(model_class, getattr(transformers, config_class)(**kw), device, dtype)
        batch, seq = shape if size == "full" else (2, 64)
        return model, make_inputs(batch, seq, device, size)

    register(Model(name, "encoder", "transformers", build, train=train,
                   dynamic_inputs=make_inputs if dynamic else None, weight=weight, note=note))


_ENC_SMALL = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=512)

_encoder("bert", "BertConfig", "BertModel", full={}, small=_ENC_SMALL, train=True, dynamic=True,
         note="BERT-base, input_ids only (the anchor workload)")
_encoder("roberta", "RobertaConfig", "RobertaModel",
         full=dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1),
         small=dict(_ENC_SMALL, max_position_embeddings=514, type_vocab_size=1, pad_token_id=1),
         inputs="mask", dynamic=True, note="RoBERTa-base with a padding mask ([b,1,1,s] broadcast)")
_encoder("deberta_v2", "DebertaV2Config", "DebertaV2Model",
         full=dict(vocab_size=128100, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                   intermediate_size=3072, max_position_embeddings=512, relative_attention=True, max_relative_positions=-1, position_buckets=256,
                   pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
                   position_biased_input=False, type_vocab_size=0),  # DeBERTa-v3-base
         small=dict(_ENC_SMALL, relative_attention=True, max_relative_positions=-1, position_buckets=32,
                    pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
                    position_biased_input=False, type_vocab_size=0),
         train=True, weight=1.3, note="disentangled attention: content-to-position gathers, log-bucketed positions")
_encoder("albert", "AlbertConfig", "AlbertModel",
         full=dict(vocab_size=30000, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                   embedding_size=128),  # base
         small=dict(_ENC_SMALL, embedding_size=32), inputs="types",
         note="one layer's weights shared by 12 layers, factorized embeddings")
_encoder("electra", "ElectraConfig", "ElectraModel",
         full=dict(embedding_size=768), small=dict(_ENC_SMALL, embedding_size=128), inputs="mask",
         note="ELECTRA-base discriminator with a padding mask")
_encoder("distilbert", "DistilBertConfig", "DistilBertModel",
         full={}, small=dict(dim=128, n_layers=2, n_heads=4, hidden_dim=512), inputs="mask",
         note="6 layers, its own mask handling")


# ----------------------------------------------------------------------------- encoder-decoders

def _seq2seq(name, config_class, model_class, full: dict, small: dict, shape=(8, 512, 128), train=False,
             weight=1.0, note=""):
    """input_ids (batch, source) and decoder_input_ids (batch, target)."""
    def build(device, dtype, size="full"):
        transformers = _transformers()

        kw = dict(full) if size == "full" else {"vocab_size": VOCAB_SMALL, **small}
        vocab = kw.get("vocab_size", 32128)
        model = _build(model_class, getattr(transformers, config_class)(use_cache=False, **kw), device, dtype)
        batch, src, tgt = shape if size == "full" else (2, 64, 16)
        return model, {"input_ids": _ids(vocab, batch, src, device),
                       "decoder_input_ids": _ids(vocab, batch, tgt, device)}

    register(Model(name, "encoder-decoder", "transformers", build, train=train, weight=weight, note=note))


_seq2seq("t5", "T5Config", "T5Model",
         full=dict(vocab_size=32128, d_model=768, d_ff=3072, d_kv=64, num_layers=12, num_heads=12),  # T5-base
         small=dict(d_model=128, d_ff=512, d_kv=32, num_layers=2, num_heads=4),
         train=True, weight=1.5, note="relative position bias added to attention scores (SDPA refuses the float bias)")
_seq2seq("bart", "BartConfig", "BartModel",
         full=dict(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
                   decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072),  # BART-base
         small=dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512),
         weight=1.2, note="learned positions, post-LayerNorm, cross-attention")
_seq2seq("marian", "MarianConfig", "MarianMTModel",
         full=dict(vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                   decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, pad_token_id=58100,
                   decoder_start_token_id=58100, max_position_embeddings=512),  # opus-mt-en-de
         small=dict(d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, pad_token_id=999,
                    decoder_start_token_id=999),
         shape=(16, 256, 256), weight=1.2, note="sinusoidal positions, a translation LM head (58k vocabulary)")


# ----------------------------------------------------------------------------- vision, audio, multimodal

def _images(batch, side, device, dtype):
    import torch

    return torch.randn(batch, 3, side, side, device=device, dtype=dtype)


def _vit(device, dtype, size="full"):
    transformers = _transformers()

    cfg = (transformers.ViTConfig() if size == "full" else
           transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                  image_size=32, patch_size=8))
    model = _build("ViTModel", cfg, device, dtype)
    return model, {"pixel_values": _images(64 if size == "full" else 2, cfg.image_size, device, dtype)}


def _swin(device, dtype, size="full"):
    transformers = _transformers()

    cfg = (transformers.SwinConfig() if size == "full" else  # Swin-T
           transformers.SwinConfig(image_size=64, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                   window_size=4))
    model = _build("SwinModel", cfg, device, dtype)
    return model, {"pixel_values": _images(64 if size == "full" else 2, cfg.image_size, device, dtype)}


def _clip(device, dtype, size="full"):
    transformers = _transformers()

    if size == "full":  # ViT-B/32 image tower, 12-layer text tower
        cfg = transformers.CLIPConfig()
        batch, text = 64, 77
    else:
        cfg = transformers.CLIPConfig(
            text_config=dict(vocab_size=VOCAB_SMALL, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, max_position_embeddings=77, bos_token_id=1, eos_token_id=2,
                             pad_token_id=0),
            vision_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                               image_size=32, patch_size=8),
            projection_dim=64)
        batch, text = 2, 16
    model = _build("CLIPModel", cfg, device, dtype)
    return model, {"input_ids": _ids(cfg.text_config.vocab_size, batch, text, device),
                   "pixel_values": _images(batch, cfg.vision_config.image_size, device, dtype)}


def _whisper_encoder(device, dtype, size="full"):
    import torch
    transformers = _transformers()
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    if size == "full":  # whisper-base's encoder: 30 s of 80 mel bins
        cfg = transformers.WhisperConfig(d_model=512, encoder_layers=6, encoder_attention_heads=8,
                                         encoder_ffn_dim=2048, num_mel_bins=80, max_source_positions=1500)
        batch = 16
    else:
        cfg = transformers.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
                                         decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=128,
                                         num_mel_bins=80, max_source_positions=64)
        batch = 2
    torch.manual_seed(0)
    with torch.device(device):
        model = WhisperEncoder(_no_dropout(cfg))
    frames = 2 * cfg.max_source_positions  # the encoder's two convolutions halve the frames
    return model.to(dtype), {"input_features": torch.randn(batch, 80, frames, device=device, dtype=dtype)}


def _wav2vec2(device, dtype, size="full"):
    import torch
    transformers = _transformers()

    if size == "full":  # wav2vec2-base: 8 clips of 10 s at 16 kHz
        cfg, batch, samples = transformers.Wav2Vec2Config(mask_time_prob=0.0), 8, 160000
    else:
        cfg = transformers.Wav2Vec2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=128, conv_dim=(32,) * 7, num_conv_pos_embeddings=16,
                                          num_conv_pos_embedding_groups=4, mask_time_prob=0.0)
        batch, samples = 2, 16000
    model = _build("Wav2Vec2Model", cfg, device, dtype)
    return model, {"input_values": torch.randn(batch, samples, device=device, dtype=dtype)}


register(Model("vit", "vision", "transformers", _vit, train=True, note="ViT-B/16, batch 64"))
register(Model("swin", "vision", "transformers", _swin, weight=1.3,
               note="Swin-T: shifted windows (roll), relative position bias gathered from a table"))
register(Model("clip", "multimodal", "transformers", _clip, weight=1.4,
               note="text (causal mask, EOS gather) and ViT-B/32 image towers, similarity logits"))
register(Model("whisper_encoder", "audio", "transformers", _whisper_encoder,
               note="whisper-base encoder: conv1d stem over 3000 mel frames, sinusoidal positions"))
register(Model("wav2vec2", "audio", "transformers", _wav2vec2, weight=1.2,
               note="conv feature extractor (GroupNorm) over raw audio, grouped positional conv"))
