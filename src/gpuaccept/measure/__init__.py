"""Measurements: worker processes (one per GPU, or under torchrun/srun) that time NCCL collectives,
pairwise exchanges and copies, and a launcher that never waits on them forever."""
