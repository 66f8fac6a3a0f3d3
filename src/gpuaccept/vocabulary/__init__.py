"""The words every layer shares, each defined once: sizes, link types and GPU and pair keys, CPU and
NUMA affinity lists, NVML's codes (and nvidia-smi's words for P2P statuses), collective names, copy
kinds, GPT shapes, step keys and labels, and how values are shown.

This package sits below everything else and imports nothing of the project: facts, profiles,
checks, measurements and reports all speak it, none owns it.
"""
