#!/usr/bin/python3
"""PyTorch peer of bench/train: one LoRA training step (forward + backward of
ART's CISPO loss over one sequence) of a Qwen2/Llama model on the CPU,
autograd, driven by the Go benchmark over stdin/stdout.

Usage (run.sh does this): OPENBLAS_CORETYPE=<this CPU's> /usr/bin/python3 torch_peer.py [fp32|bf16] DIR
fp32 (the default): fp32 weights and compute (matrix products on OpenBLAS).
bf16: the base weights in bf16 and the step under torch.autocast("cpu",
dtype=torch.bfloat16), as a PyTorch user on a CPU with bf16 units trains and
as ART trains on GPUs (matrix products on oneDNN where the CPU has bf16
instructions); norms, residuals and the log-softmax stay fp32, and the LoRA
factors are fp32 parameters (autocast casts them for the products).
DIR holds model/ (config.json + model.safetensors, as the engine saved it),
adapter/ (PEFT adapter_config.json + adapter_model.safetensors) and
tokens.json ({"tokens": [...]}).

Protocol: prints "ready <json>" once loaded; answers each "step" line with
"step <seconds> <loss> <CPU seconds>" and "quit" with "rss <peak RSS bytes>".

The model is written the way transformers' eager Qwen2/Llama code computes
it (torch 1.13 has no scaled_dot_product_attention), with PEFT-style LoRA
(y = W x + b + (alpha/r)·B A x) on every adapted projection. Base weights are
frozen (no weight gradients), the LoRA factors get gradients. The loss is
CISPO on-policy (old logprobs = new, so the IS weight is 1) with advantage 1
and weight 1: the mean of -logπ over the scored tokens.
"""
import json
import math
import os
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

THREADS = 2


def read_safetensors(path):
    """Hand-parsed safetensors (Debian has no safetensors package), as fp32.
    Tensors are read one at a time so loading adds little to the peak RSS."""
    out = {}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            b, e = info["data_offsets"]
            f.seek(base + b)
            raw = f.read(e - b)
            dt = info["dtype"]
            if dt == "F32":
                arr = np.frombuffer(raw, dtype="<f4").copy()
            elif dt == "F16":
                arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
            elif dt == "BF16":
                arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                raise SystemExit("unsupported dtype " + dt)
            del raw
            out[name] = torch.from_numpy(arr.reshape(info["shape"]))
    return out


def rope_inv_freq(cfg, hd):
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    rs = cfg.get("rope_scaling")
    if rs and (rs.get("rope_type") or rs.get("type")) == "llama3":
        factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wl = 2 * math.pi / inv
        scaled = torch.where(wl > old / lo, inv / factor, inv)
        smooth = (old / wl - lo) / (hi - lo)
        medium = (~(wl < old / hi)) & (~(wl > old / lo))
        inv = torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    return inv


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class Step:
    def __init__(self, d, precision):
        cfg = json.load(open(d + "/model/config.json"))
        self.cfg = cfg
        self.bf16 = precision == "bf16"
        self.W = read_safetensors(d + "/model/model.safetensors")
        if self.bf16:
            # The file holds bf16, so this cast is exact. The embedding table
            # stays fp32 when the LM head is tied to it (a lookup, then the
            # head's product under autocast).
            for name, t in self.W.items():
                if t.dim() == 2 and not name.endswith("embed_tokens.weight"):
                    self.W[name] = t.to(torch.bfloat16)
        acfg = json.load(open(d + "/adapter/adapter_config.json"))
        r, alpha = acfg["r"], acfg["lora_alpha"]
        self.scale = alpha / math.sqrt(r) if acfg.get("use_rslora") else alpha / r
        self.lora = {}
        self.params = []
        for name, t in read_safetensors(d + "/adapter/adapter_model.safetensors").items():
            mod, factor = name[len("base_model.model.") :].rsplit(".lora_", 1)
            t.requires_grad_(True)
            self.params.append(t)
            self.lora.setdefault(mod, {})[factor[0]] = t
        self.tokens = torch.tensor(json.load(open(d + "/tokens.json"))["tokens"])
        T = len(self.tokens)
        C = cfg["hidden_size"]
        self.NH = cfg["num_attention_heads"]
        self.KVH = cfg.get("num_key_value_heads", self.NH)
        self.HD = cfg.get("head_dim") or C // self.NH
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        ang = torch.arange(T, dtype=torch.float64)[:, None] * rope_inv_freq(cfg, self.HD)[None, :]
        emb = torch.cat((ang, ang), dim=-1)
        self.cos, self.sin = emb.cos().float(), emb.sin().float()
        self.mask = torch.full((T, T), float("-inf")).triu(1)

    def proj(self, x, name, bias):
        y = F.linear(x, self.W[name + ".weight"], self.W.get(name + ".bias") if bias else None)
        ab = self.lora.get(name)
        if ab is not None:
            y = y + self.scale * F.linear(F.linear(x, ab["A"]), ab["B"])
        return y

    def loss(self):
        cfg, W, tokens = self.cfg, self.W, self.tokens
        T, NH, KVH, HD, eps = len(tokens), self.NH, self.KVH, self.HD, self.eps
        qkv_bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)
        o_bias = cfg["model_type"] == "llama" and cfg.get("attention_bias", False)
        mlp_bias = cfg.get("mlp_bias", False)
        x = F.embedding(tokens, W["model.embed_tokens.weight"])
        for l in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{l}."
            h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
            q = self.proj(h, p + "self_attn.q_proj", qkv_bias).view(T, NH, HD).transpose(0, 1)
            k = self.proj(h, p + "self_attn.k_proj", qkv_bias).view(T, KVH, HD).transpose(0, 1)
            v = self.proj(h, p + "self_attn.v_proj", qkv_bias).view(T, KVH, HD).transpose(0, 1)
            q = q * self.cos + rotate_half(q) * self.sin
            k = k * self.cos + rotate_half(k) * self.sin
            k = k.repeat_interleave(NH // KVH, dim=0)
            v = v.repeat_interleave(NH // KVH, dim=0)
            att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(HD) + self.mask, dim=-1)
            o = (att @ v).transpose(0, 1).reshape(T, NH * HD)
            x = x + self.proj(o, p + "self_attn.o_proj", o_bias)
            h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
            g = self.proj(h, p + "mlp.gate_proj", mlp_bias)
            u = self.proj(h, p + "mlp.up_proj", mlp_bias)
            x = x + self.proj(F.silu(g) * u, p + "mlp.down_proj", mlp_bias)
            x = x.float()  # residual stream in fp32 (under autocast a product is bf16)
        x = rmsnorm(x, W["model.norm.weight"], eps)
        head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
        logp = torch.log_softmax(F.linear(x[:-1], head).float(), dim=-1)
        new = logp.gather(1, tokens[1:, None]).squeeze(1)
        old = new.detach()  # on-policy
        weight = torch.clamp(torch.exp(new.detach() - old), 1 - 1.0, 1 + 4.0)  # CISPO, ε = 1, ε_high = 4
        adv, w = 1.0, 1.0
        return (-weight * adv * new * w).sum() / new.shape[0]


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main():
    torch.set_num_threads(THREADS)
    t0 = time.perf_counter()
    args = sys.argv[1:]
    precision = args.pop(0) if len(args) == 2 else "fp32"
    if precision not in ("fp32", "bf16") or len(args) != 1:
        raise SystemExit("usage: torch_peer.py [fp32|bf16] DIR")
    s = Step(args[0], precision)
    capability = ""
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage" in line:
            capability = line.split(":", 1)[1].strip()
    print("ready " + json.dumps({
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "precision": precision, "cpu_capability": capability,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "load_s": round(time.perf_counter() - t0, 1),
        "peak_rss_load_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "step":
            for p in s.params:
                p.grad = None
            t, c = time.perf_counter(), cpu_seconds()
            if s.bf16:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = s.loss()
            else:
                loss = s.loss()
            loss.backward()
            dt, dc = time.perf_counter() - t, cpu_seconds() - c
            print("step %.6f %.9f %.6f" % (dt, loss.item(), dc), flush=True)
        elif cmd == "quit":
            print("rss %d" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024), flush=True)
            return


if __name__ == "__main__":
    main()
