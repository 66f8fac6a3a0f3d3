"""The words every layer shares, each defined once: sizes, link types and GPU and pair keys, NVML's
codes, collective names, copy kinds, GPT shapes, step keys and labels, and how values are shown.

This package sits below everything else and imports nothing of the project: facts, profiles,
checks, measurements and reports all speak it, none owns it.
"""
