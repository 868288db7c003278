#!/usr/bin/python3
"""Independent float64 PyTorch autograd reference for the LoRA gradients of
ART's CISPO loss (engine/train/torch_test.go).

Usage: /usr/bin/python3 torch_lora_ref.py < request.json > response.json

request:
  {"model_dir": str,          # config.json + model.safetensors (any family of torch_ref.py)
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
RoPE (and before Qwen3's and Gemma's q/k norms), since LoRA wraps the
nn.Linear. The model is engine/model/testdata/torch_ref.py's, written
independently of the Go engine.
"""
import json
import math
import sys

import os

import torch

# The model itself is engine/model's reference, shared so both follow the
# same families.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "model", "testdata"))
import torch_ref  # noqa: E402

read_safetensors = torch_ref.read_safetensors


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
    return torch_ref.logits(cfg, W, tokens, lora.delta)


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
