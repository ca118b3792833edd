"""mdl's GPT (nn/models/transformers.cpp) written in PyTorch, for the side-by-side scripts
(compare_torch_gpt.py on the CPU, torch_gpu_step.py on a GPU): token and position embeddings,
pre-norm blocks with causal self-attention and an exact-GELU feed-forward, a final LayerNorm, an
untied bias-free head. Defaults are the GPU benchmark's size (6 layers, width 384, context 256).
"""
import inspect

import torch
import torch.nn as nn
import torch.nn.functional as F

# PyTorch 2 takes is_causal as a hint that picks its causal kernels; 1.13 (Debian's) has no such argument.
_CAUSAL_HINT = "is_causal" in inspect.signature(nn.MultiheadAttention.forward).parameters


class Block(nn.Module):
    """mdl's TransformerEncoderLayer: pre-norm, causal self-attention, exact GELU feed-forward."""

    def __init__(self, e, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(e), nn.LayerNorm(e)
        self.self_attn = nn.MultiheadAttention(e, heads, batch_first=True)
        self.linear1, self.linear2 = nn.Linear(e, 4 * e), nn.Linear(4 * e, e)

    def forward(self, x, mask):
        h = self.norm1(x)
        hint = {"is_causal": True} if _CAUSAL_HINT else {}
        x = x + self.self_attn(h, h, h, attn_mask=mask, need_weights=False, **hint)[0]
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=65, context=256, n_layer=6, n_head=6, n_embd=384):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, n_embd), nn.Embedding(context, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        mask = torch.triu(torch.full((t, t), float("-inf"), device=idx.device), diagonal=1)
        for b in self.blocks:
            x = b(x, mask)
        return self.lm_head(self.ln_f(x))
