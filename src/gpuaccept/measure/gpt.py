"""A self-contained GPT-2-style language model for the DDP workload: no downloads, synthetic tokens.

Pre-norm transformer blocks (causal self-attention through scaled_dot_product_attention, a 4x
MLP), learned positions, and an output layer tied to the token embedding, as in GPT-2, built to
the dimensions of `gpuaccept.vocabulary.gpt` (whose parameter count it has).
"""

from __future__ import annotations

from gpuaccept.vocabulary.gpt import GptDims


def build(shape: GptDims):
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(shape.d_model)
            self.qkv = nn.Linear(shape.d_model, 3 * shape.d_model)
            self.proj = nn.Linear(shape.d_model, shape.d_model)
            self.norm2 = nn.LayerNorm(shape.d_model)
            self.up = nn.Linear(shape.d_model, 4 * shape.d_model)
            self.down = nn.Linear(4 * shape.d_model, shape.d_model)

        def forward(self, x):
            batch, length, width = x.shape
            q, k, v = self.qkv(self.norm1(x)).split(width, dim=2)
            heads = lambda t: t.view(batch, length, shape.heads, width // shape.heads).transpose(1, 2)  # noqa: E731
            attended = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
            x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(shape.vocab, shape.d_model)
            self.positions = nn.Embedding(shape.seq_len, shape.d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(shape.layers))
            self.norm = nn.LayerNorm(shape.d_model)

        def forward(self, tokens):
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.tokens(tokens) + self.positions(positions)
            for block in self.blocks:
                x = block(x)
            return self.norm(x) @ self.tokens.weight.t()  # output layer tied to the embedding

    return Gpt()
