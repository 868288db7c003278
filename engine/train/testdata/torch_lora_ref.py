#!/usr/bin/python3
"""Independent float64 PyTorch autograd reference for the LoRA gradients of
ART's CISPO loss (engine/train/torch_test.go).

Usage: /usr/bin/python3 torch_lora_ref.py < request.json > response.json

request:
  {"model_dir": str,          # config.json + model.safetensors (Llama / Qwen2)
   "adapter_dir": str,        # PEFT: adapter_config.json + adapter_model.safetensors
   "epsilon": float, "epsilon_high": float,
   "sequences": [{"tokens": [int, ...],            # one packed row, no padding
                  "assistant_mask": [0|1, ...],    # 1 = sampled token, trains
                  "logprobs": [float|null, ...],   # rollout logprobs; null = NaN
                  "advantages": [float, ...],
                  "weights": [float, ...]}]}
  All per-token arrays are aligned with tokens and shifted here, as ART does:
  position t-1 predicts token t, so index 0 never trains.

response:
  {"loss": float,                 # Σ over rows of the row loss
   "logprobs": [[float, ...]],    # new logprobs of the trainable tokens, per row
   "grads": {peft_name: [float, ...]}}   # d loss / d every LoRA factor, row-major

Loss (ART's CISPO, src/art/loss.py): per token
  L = -clip(r.detach(), 1-eps, 1+eps_high) * A * logp_new,  r = exp(logp_new - logp_old),
an unknown old logprob counts as on-policy (old := new.detach(), r = 1), and
the row loss is Σ L·w·mask / Σ mask.

The model follows the transformers modeling code with PEFT's LoRA layers
(y = W x + b + (alpha/r)·B A x, alpha/sqrt(r) with use_rslora) on every
projection that has lora_A/lora_B tensors; q and k get their update before
RoPE, since LoRA wraps the nn.Linear. It is written independently of the Go
engine; the safetensors files are parsed by hand (Debian has no safetensors
package).
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


class LoRA:
    """PEFT LoRA factors keyed by the wrapped module's name
    (model.layers.{i}.self_attn.q_proj), as float64 leaves with gradients."""

    def __init__(self, adapter_dir):
        acfg = json.load(open(adapter_dir + "/adapter_config.json"))
        r, alpha = acfg["r"], acfg["lora_alpha"]
        self.scale = alpha / math.sqrt(r) if acfg.get("use_rslora") else alpha / r
        self.params = {}  # peft name -> leaf tensor
        self.pairs = {}  # module name -> (A, B)
        self.used = set()
        prefix = "base_model.model."
        for name, t in read_safetensors(adapter_dir + "/adapter_model.safetensors").items():
            if not name.startswith(prefix):
                raise SystemExit("unexpected adapter tensor " + name)
            mod, factor = name[len(prefix) :].replace(".default.", ".").rsplit(".lora_", 1)
            leaf = t.clone().requires_grad_(True)
            self.params[name] = leaf
            a, b = self.pairs.get(mod, (None, None))
            if factor == "A.weight":
                a = leaf
            elif factor == "B.weight":
                b = leaf
            else:
                raise SystemExit("unexpected adapter tensor " + name)
            self.pairs[mod] = (a, b)
        for mod, (a, b) in self.pairs.items():
            if a is None or b is None or a.shape[0] != r or b.shape[1] != r:
                raise SystemExit("incomplete or misshaped LoRA pair for " + mod)

    def delta(self, x, mod):
        if mod not in self.pairs:
            return None
        self.used.add(mod)
        a, b = self.pairs[mod]
        return self.scale * ((x @ a.T) @ b.T)


def logits_fn(cfg, W, lora, tokens):
    T = len(tokens)
    C = cfg["hidden_size"]
    NH = cfg["num_attention_heads"]
    KVH = cfg.get("num_key_value_heads", NH)
    HD = cfg.get("head_dim") or C // NH
    eps = cfg.get("rms_norm_eps", 1e-6)
    qkv_bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)
    o_bias = cfg["model_type"] == "llama" and cfg.get("attention_bias", False)
    mlp_bias = cfg.get("mlp_bias", False)

    inv = rope_inv_freq(cfg, HD)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos(), emb.sin()

    def lin(x, name, has_bias):
        y = x @ W[name + ".weight"].T
        if has_bias:
            y = y + W[name + ".bias"]
        d = lora.delta(x, name)
        return y if d is None else y + d

    x = W["model.embed_tokens.weight"][tokens]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        q = lin(h, p + "self_attn.q_proj", qkv_bias).view(T, NH, HD).transpose(0, 1)
        k = lin(h, p + "self_attn.k_proj", qkv_bias).view(T, KVH, HD).transpose(0, 1)
        v = lin(h, p + "self_attn.v_proj", qkv_bias).view(T, KVH, HD).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(NH // KVH, dim=0)
        v = v.repeat_interleave(NH // KVH, dim=0)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(HD) + mask
        att = torch.softmax(att, dim=-1)
        o = (att @ v).transpose(0, 1).reshape(T, NH * HD)
        x = x + lin(o, p + "self_attn.o_proj", o_bias)
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = lin(h, p + "mlp.gate_proj", mlp_bias)
        u = lin(h, p + "mlp.up_proj", mlp_bias)
        x = x + lin(torch.nn.functional.silu(g) * u, p + "mlp.down_proj", mlp_bias)
    x = rmsnorm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    return x @ head.T


def cispo_row_loss(logits, seq, eps_lo, eps_hi):
    """ART's CISPO loss of one row; returns (loss, trainable new logprobs)."""
    tokens = torch.tensor(seq["tokens"])
    mask = torch.tensor(seq["assistant_mask"], dtype=torch.float64)[1:]
    old = torch.tensor([math.nan if v is None else v for v in seq["logprobs"]], dtype=torch.float64)[1:]
    adv = torch.tensor(seq["advantages"], dtype=torch.float64)[1:]
    w = torch.tensor(seq["weights"], dtype=torch.float64)[1:]
    T = len(tokens)
    new = torch.log_softmax(logits[:-1], dim=-1)[torch.arange(T - 1), tokens[1:]]
    old = torch.where(torch.isnan(old), new.detach(), old)
    ratio = torch.exp(new.detach() - old)
    weight = torch.clamp(ratio, 1 - eps_lo, 1 + eps_hi)
    per_token = -weight * adv * new
    loss = (per_token * w * mask).sum() / mask.sum()
    return loss, new.detach()[mask.bool()].tolist()


def main():
    req = json.load(sys.stdin)
    cfg = json.load(open(req["model_dir"] + "/config.json"))
    W = read_safetensors(req["model_dir"] + "/model.safetensors")
    lora = LoRA(req["adapter_dir"])
    total = torch.zeros(())
    logprobs = []
    for seq in req["sequences"]:
        logits = logits_fn(cfg, W, lora, torch.tensor(seq["tokens"]))
        loss, lp = cispo_row_loss(logits, seq, req["epsilon"], req["epsilon_high"])
        total = total + loss
        logprobs.append(lp)
    if lora.used != set(lora.pairs):
        raise SystemExit("adapter tensors for modules the model does not have: %s" % sorted(set(lora.pairs) - lora.used))
    total.backward()
    grads = {name: t.grad.reshape(-1).tolist() for name, t in lora.params.items()}
    json.dump({"loss": total.item(), "logprobs": logprobs, "grads": grads}, sys.stdout)


if __name__ == "__main__":
    main()
