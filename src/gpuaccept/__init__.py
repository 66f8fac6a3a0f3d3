"""gpu-accept: hardware acceptance tests for multi-GPU servers."""

__version__ = "0.1.0"
