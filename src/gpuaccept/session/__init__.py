"""The multi-node runner: one gpu-accept process per node, started by torchrun (cluster.py), and
the record of its results (cluster_report.py)."""
