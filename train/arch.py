"""Builds the Gemma 4 target (Gemma4ForCausalLM, text config) and its assistant
(Gemma4AssistantForCausalLM) from train/config.json, with transformers' own classes."""
import torch
from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM, Gemma4ForCausalLM, Gemma4TextConfig


def _rope(t):
    return {"sliding_attention": {"rope_type": "default", "rope_theta": t["rope_theta_swa"]},
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": t["partial_rotary_factor_full"],
                               "rope_theta": t["rope_theta_full"]}}


def text_config(t, vocab, **over):
    kw = dict(vocab_size=vocab, hidden_size=t["hidden_size"], intermediate_size=t["intermediate_size"],
              num_hidden_layers=t["num_hidden_layers"], layer_types=list(t["layer_types"]),
              num_attention_heads=t["num_attention_heads"], num_key_value_heads=t["num_key_value_heads"],
              head_dim=t["head_dim"], global_head_dim=t["global_head_dim"],
              num_global_key_value_heads=t["num_global_key_value_heads"], attention_k_eq_v=t["attention_k_eq_v"],
              sliding_window=t["sliding_window"], max_position_embeddings=t["max_position_embeddings"],
              final_logit_softcapping=t["final_logit_softcapping"], rope_parameters=_rope(t),
              hidden_size_per_layer_input=0, vocab_size_per_layer_input=0, num_kv_shared_layers=0,
              enable_moe_block=False, use_double_wide_mlp=False, tie_word_embeddings=True,
              hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
              pad_token_id=0, eos_token_id=1, bos_token_id=2)
    kw.update(over)
    return Gemma4TextConfig(**kw)


def build_target(t, vocab):
    cfg = text_config(t, vocab)
    model = Gemma4ForCausalLM(cfg)
    set_attn(model, "sdpa")
    return model


def build_assistant(t, a, vocab):
    """The drafter's attention geometry (head dims, KV heads per layer type, window, RoPE) must
    equal the target's, because its layers read the target's K/V directly."""
    n = a["num_hidden_layers"]
    types = ["sliding_attention"] * (n - 1) + ["full_attention"]
    tcfg = text_config(t, vocab, hidden_size=a["hidden_size"], intermediate_size=a["intermediate_size"],
                       num_hidden_layers=n, layer_types=types, num_attention_heads=a["num_attention_heads"],
                       num_kv_shared_layers=n, final_logit_softcapping=None)
    cfg = Gemma4AssistantConfig(text_config=tcfg, backbone_hidden_size=t["hidden_size"],
                                use_ordered_embeddings=False, tie_word_embeddings=True)
    model = Gemma4AssistantForCausalLM(cfg)
    set_attn(model, "sdpa")
    return model


def set_attn(model, impl):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:
        model.config._attn_implementation = impl


def unique_params(model):
    seen, n = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            n += p.numel()
    return n


def check_tied(model):
    emb = model.get_input_embeddings().weight
    if model.lm_head.weight.data_ptr() != emb.data_ptr():
        model.lm_head.weight = emb
    return model.lm_head.weight.data_ptr() == emb.data_ptr()


def round_to_f16(model):
    """Rounds every float tensor to f16 values (kept in f32), so what we evaluate is exactly
    what an f16 GGUF holds."""
    with torch.no_grad():
        tensors = list(model.parameters())
        # Only the persistent per-layer scalars; RoPE tables and embed_scale are recomputed.
        tensors += [b for name, b in model.named_buffers() if name.endswith("layer_scalar")]
        for t in tensors:
            if t.is_floating_point():
                t.copy_(t.half().float())
