#!/usr/bin/python3
"""Independent float64 PyTorch reference for engine/model (Llama, Qwen2,
Qwen3, Qwen3-MoE, Mistral, Gemma 3 text).

Usage: /usr/bin/python3 torch_ref.py MODEL_DIR < request.json > response.json
request:  {"tokens": [int, ...],
           "grad_weights": [float, ...]}   # optional, one per logprob
response: {"logprobs": [float, ...],   # log p(tokens[t+1] | tokens[:t+1])
           "grads": {name: [float, ...]}}  # with grad_weights: d Σ w·logprob / d every tensor

engine/train/testdata/torch_lora_ref.py imports logits() from here, passing
a hook that adds LoRA deltas to the projections.

It reads config.json and model.safetensors (parsed here by hand: Debian has no
safetensors package) and follows the transformers modeling code, written
independently of the Go engine.
"""
import json
import math
import struct
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b : base + e]
        dt = info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float64)
        elif dt == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32).astype(np.float64)
        else:
            raise SystemExit("unsupported dtype " + dt)
        out[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    return out


def rope_inv_freq(cfg, hd):
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    rs = cfg.get("rope_scaling")
    if rs and (rs.get("rope_type") or rs.get("type")) == "linear":
        return inv / rs["factor"]
    if rs and (rs.get("rope_type") or rs.get("type")) == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        lo_wl, hi_wl = old / lo, old / hi
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > lo_wl, inv / factor, inv)
        smooth = (old / wl - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (~(wl < hi_wl)) & (~(wl > lo_wl))
        inv = torch.where(medium, smoothed, scaled)
    return inv


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rmsnorm(x, w, eps, plus_one=False):
    scale = 1 + w if plus_one else w
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * scale


def layer_types(cfg):
    """Per layer: the sliding window (keys seen, the query's own included)
    or None, and whether the layer rotates with the local base frequency."""
    L = cfg["num_hidden_layers"]
    mt = cfg["model_type"]
    if mt == "gemma3_text":
        types = cfg.get("layer_types")
        if not types:
            pat = cfg.get("sliding_window_pattern", 6)
            types = ["full_attention" if (i + 1) % pat == 0 else "sliding_attention" for i in range(L)]
        return [(cfg["sliding_window"], True) if t == "sliding_attention" else (None, False) for t in types]
    if mt == "mistral" and cfg.get("sliding_window"):
        return [(cfg["sliding_window"], False)] * L
    return [(None, False)] * L


def is_moe(cfg, l):
    """Qwen3MoeDecoderLayer: experts unless the layer is in mlp_only_layers
    or (l+1) is not a multiple of decoder_sparse_step."""
    if cfg["model_type"] != "qwen3_moe" or cfg.get("num_experts", 0) <= 0:
        return False
    step = cfg.get("decoder_sparse_step", 1)
    return l not in cfg.get("mlp_only_layers", []) and (l + 1) % step == 0


def moe_mlp(cfg, W, h, p, act_fn, lin):
    """Qwen3MoeSparseMoeBlock: softmax router, top-k experts, weights
    renormalised when norm_topk_prob, each expert a SwiGLU MLP whose
    projections go through lin (so a LoRA hook reaches them, as PEFT's
    does on transformers' per-expert nn.Linear)."""
    k = cfg["num_experts_per_tok"]
    probs = torch.softmax(h @ W[p + "mlp.gate.weight"].T, dim=-1)
    weights, experts = torch.topk(probs, k, dim=-1)
    if cfg.get("norm_topk_prob", False):
        weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(h)
    for e in range(cfg["num_experts"]):
        rows, rank = torch.where(experts == e)
        if len(rows) == 0:
            continue
        pe = f"{p}mlp.experts.{e}."
        x = h[rows]
        y = lin(act_fn(lin(x, pe + "gate_proj", False)) * lin(x, pe + "up_proj", False), pe + "down_proj", False)
        out = out.index_add(0, rows, y * weights[rows, rank, None])
    return out


def logits(cfg, W, tokens, lin_hook=None):
    """The model's logits (T, V) for tokens, following the transformers
    modeling code of cfg's model_type. lin_hook(x, name) may return a delta
    added to the projection name's output (LoRA) or None."""
    T = len(tokens)
    mt = cfg["model_type"]
    gemma = mt == "gemma3_text"
    C = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    KVH = cfg.get("num_key_value_heads", NH)
    HD = cfg.get("head_dim") or C // NH
    eps = cfg.get("rms_norm_eps", 1e-6)
    qkv_bias = mt == "qwen2" or cfg.get("attention_bias", False)
    o_bias = mt != "qwen2" and cfg.get("attention_bias", False)
    mlp_bias = cfg.get("mlp_bias", False)
    qk_norm = mt in ("qwen3", "qwen3_moe", "gemma3_text")
    act = cfg.get("hidden_activation") or cfg.get("hidden_act", "silu")
    if gemma:
        scaling = cfg["query_pre_attn_scalar"] ** -0.5
    else:
        scaling = 1 / math.sqrt(HD)

    def norm(x, name):
        return rmsnorm(x, W[name], eps, gemma)

    def rope_tables(inv):
        ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        return emb.cos(), emb.sin()

    rope_global = rope_tables(rope_inv_freq(cfg, HD))
    rope_local = rope_global
    if gemma:
        local = dict(cfg, rope_theta=cfg["rope_local_base_freq"], rope_scaling=None)
        rope_local = rope_tables(rope_inv_freq(local, HD))

    def lin(x, name, has_bias):
        y = x @ W[name + ".weight"].T
        if has_bias:
            y = y + W[name + ".bias"]
        if lin_hook is not None:
            d = lin_hook(x, name)
            if d is not None:
                y = y + d
        return y

    if act == "silu":
        act_fn = torch.nn.functional.silu
    elif act == "gelu_pytorch_tanh":
        act_fn = lambda x: torch.nn.functional.gelu(x, approximate="tanh")
    else:
        raise SystemExit("unsupported activation " + act)

    x = W["model.embed_tokens.weight"][tokens]
    if gemma:
        x = x * math.sqrt(C)
    i = torch.arange(T)
    for l, (window, local_rope) in enumerate(layer_types(cfg)):
        p = f"model.layers.{l}."
        cos, sin = rope_local if local_rope else rope_global
        allowed = i[None, :] <= i[:, None]
        if window:
            allowed = allowed & (i[:, None] - i[None, :] < window)
        mask = torch.zeros(T, T).masked_fill(~allowed, float("-inf"))
        h = norm(x, p + "input_layernorm.weight")
        q = lin(h, p + "self_attn.q_proj", qkv_bias).view(T, NH, HD)
        k = lin(h, p + "self_attn.k_proj", qkv_bias).view(T, KVH, HD)
        v = lin(h, p + "self_attn.v_proj", qkv_bias).view(T, KVH, HD).transpose(0, 1)
        if qk_norm:
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        q, k = q.transpose(0, 1), k.transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(NH // KVH, dim=0)
        v = v.repeat_interleave(NH // KVH, dim=0)
        att = (q @ k.transpose(-1, -2)) * scaling + mask
        att = torch.softmax(att, dim=-1)
        o = lin((att @ v).transpose(0, 1).reshape(T, NH * HD), p + "self_attn.o_proj", o_bias)
        if gemma:
            x = x + norm(o, p + "post_attention_layernorm.weight")
            h = norm(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + o
            h = norm(x, p + "post_attention_layernorm.weight")
        if is_moe(cfg, l):
            d = moe_mlp(cfg, W, h, p, act_fn, lin)
        else:
            g = lin(h, p + "mlp.gate_proj", mlp_bias)
            u = lin(h, p + "mlp.up_proj", mlp_bias)
            d = lin(act_fn(g) * u, p + "mlp.down_proj", mlp_bias)
        if gemma:
            d = norm(d, p + "post_feedforward_layernorm.weight")
        x = x + d
    x = norm(x, "model.norm.weight")
    tied = cfg.get("tie_word_embeddings", gemma)
    head = W["model.embed_tokens.weight"] if tied else W["lm_head.weight"]
    return x @ head.T


def main():
    model_dir = sys.argv[1]
    cfg = json.load(open(model_dir + "/config.json"))
    req = json.load(sys.stdin)
    W = read_safetensors(model_dir + "/model.safetensors")
    gw = req.get("grad_weights")
    if gw is not None:
        for t in W.values():
            t.requires_grad_(True)
    tokens = torch.tensor(req["tokens"])
    T = len(tokens)
    logp = torch.log_softmax(logits(cfg, W, tokens), dim=-1)
    lp = logp[torch.arange(T - 1), tokens[1:]]
    out = {"logprobs": lp.tolist()}
    if gw is not None:
        (lp * torch.tensor(gw)).sum().backward()
        out["grads"] = {n: t.grad.reshape(-1).tolist() for n, t in W.items() if t.grad is not None}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
