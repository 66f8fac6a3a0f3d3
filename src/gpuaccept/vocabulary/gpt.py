"""The GPT-2-style model of the DDP workload, as dimensions: its presets and its parameter count.

Pre-norm transformer blocks (attention 4d^2, a 4x MLP 8d^2, norms and biases), learned positions,
and an output layer tied to the token embedding, as in GPT-2. The dimensions are what a profile
names and what a DDP step carries to its workers; `gpuaccept.measure.gpt` builds the model itself.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


# A profile's `ddp.model` when it gives dimensions rather than a preset's name. No docstring: this
# class is published in the profile JSON Schema as it is, and a docstring would become part of it.
class GptDims(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    layers: Annotated[int, Field(ge=1, le=200)]
    d_model: Annotated[int, Field(ge=8, le=16384)]
    heads: Annotated[int, Field(ge=1, le=256)]
    vocab: Annotated[int, Field(ge=2, le=1_000_000)] = 50304
    seq_len: Annotated[int, Field(ge=2, le=65536)] = 1024

    def parameters(self) -> int:
        block = 12 * self.d_model**2 + 13 * self.d_model  # attention 4d^2, MLP 8d^2, norms and biases
        return self.layers * block + (self.vocab + self.seq_len) * self.d_model + 2 * self.d_model


GptPreset = Literal["tiny", "gpt2-small", "gpt2-medium", "gpt2-large"]
# sizes from a few thousand parameters (CPU tests) to GPT-2 large
PRESETS: dict[GptPreset, GptDims] = {
    "tiny": GptDims(layers=2, d_model=64, heads=2, vocab=512, seq_len=32),
    "gpt2-small": GptDims(layers=12, d_model=768, heads=12, vocab=50304, seq_len=1024),
    "gpt2-medium": GptDims(layers=24, d_model=1024, heads=16, vocab=50304, seq_len=1024),
    "gpt2-large": GptDims(layers=36, d_model=1280, heads=20, vocab=50304, seq_len=1024),
}
