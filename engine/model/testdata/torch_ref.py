#!/usr/bin/python3
"""Independent float64 PyTorch reference for engine/model (Llama / Qwen2).

Usage: /usr/bin/python3 torch_ref.py MODEL_DIR < request.json > response.json
request:  {"tokens": [int, ...]}
response: {"logprobs": [float, ...]}   # log p(tokens[t+1] | tokens[:t+1])

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


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def main():
    model_dir = sys.argv[1]
    cfg = json.load(open(model_dir + "/config.json"))
    req = json.load(sys.stdin)
    W = read_safetensors(model_dir + "/model.safetensors")
    tokens = torch.tensor(req["tokens"])
    T = len(tokens)
    C = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    KVH = cfg.get("num_key_value_heads", NH)
    HD = cfg.get("head_dim") or C // NH
    eps = cfg.get("rms_norm_eps", 1e-6)
    bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)

    inv = rope_inv_freq(cfg, HD)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def lin(x, name, has_bias):
        y = x @ W[name + ".weight"].T
        if has_bias:
            y = y + W[name + ".bias"]
        return y

    x = W["model.embed_tokens.weight"][tokens]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj", bias).view(T, NH, HD).transpose(0, 1)
        k = lin(h, p + "self_attn.k_proj", bias).view(T, KVH, HD).transpose(0, 1)
        v = lin(h, p + "self_attn.v_proj", bias).view(T, KVH, HD).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(NH // KVH, dim=0)
        v = v.repeat_interleave(NH // KVH, dim=0)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(HD) + mask
        att = torch.softmax(att, dim=-1)
        o = (att @ v).transpose(0, 1).reshape(T, NH * HD)
        x = x + lin(o, p + "self_attn.o_proj", cfg["model_type"] == "llama" and cfg.get("attention_bias", False))
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        mb = cfg.get("mlp_bias", False)
        g = lin(h, p + "mlp.gate_proj", mb)
        u = lin(h, p + "mlp.up_proj", mb)
        x = x + lin(torch.nn.functional.silu(g) * u, p + "mlp.down_proj", mb)
    x = rmsnorm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    logp = torch.log_softmax(x @ head.T, dim=-1)
    lp = logp[torch.arange(T - 1), tokens[1:]]
    json.dump({"logprobs": lp.tolist()}, sys.stdout)


if __name__ == "__main__":
    main()
