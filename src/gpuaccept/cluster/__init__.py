"""The multi-node runner (`gpu-accept cluster`): one rank of a job over many nodes, started by the
cluster's own torchrun or srun (`runner`), and the reports its global rank 0 and each node write
(`reports`). It sits beside the pytest plugin: both run measurements and judge them, neither
imports the other."""
