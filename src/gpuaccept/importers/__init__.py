"""Command outputs people already hold, read into facts: `nvidia-smi topo -m`, `topo -p2p`,
`nvlink -s` and nccl-tests logs, one module per kind, put together by `assemble`.

Facts read from text say so (`Facts.imported_from`: the files, what each held, every finding) and
mark what no output tells as `not_probed`, so the same checks judge them and say "could not be
established" where the text is silent.
"""

from gpuaccept.importers.assemble import Imported, import_files

__all__ = ["Imported", "import_files"]
