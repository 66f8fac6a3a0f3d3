"""A loaded profile: the validated spec, where it came from, and the expectations it implies."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.profile.spec import NicAffinity, P2PCaps, ProfileSpec
from gpuaccept.vocabulary.links import gpu_key, pair_key, parse_link_matrix, parse_p2p_matrix


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    spec: ProfileSpec
    provenance: dict[str, str] = field(default_factory=dict)  # dotted key path -> the comment beside it
    sha256: str = ""

    @property
    def gpu_count(self) -> int:
        return self.spec.gpus.count

    @property
    def marginal_band(self) -> float:
        return self.spec.judging.marginal_band

    def gpu_pairs(self) -> list[tuple[int, int]]:
        """Unordered pairs a < b, the subjects of link-type tests."""
        n = self.gpu_count
        return [(a, b) for a in range(n) for b in range(a + 1, n)]

    def ordered_gpu_pairs(self) -> list[tuple[int, int]]:
        """Ordered pairs a != b, the subjects of P2P tests (capabilities are directional)."""
        n = self.gpu_count
        return [(a, b) for a in range(n) for b in range(n) if a != b]

    def model_matches(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.spec.gpus.model)

    def matches_machine(self, gpu_model: str, gpu_count: int) -> bool:
        rule = self.spec.match
        if rule is None:
            return False
        return gpu_count == rule.gpu_count and any(fnmatch.fnmatchcase(gpu_model, p) for p in rule.gpu_model)

    def expected_link(self, a: int, b: int) -> str | None:
        links = self.spec.links
        if links is None:
            return None
        if links.matrix is not None:
            matrix = parse_link_matrix(links.matrix)
            return matrix[a][b] if max(a, b) < len(matrix) else None
        return links.pairs.get(pair_key(a, b)) or links.pairs.get(pair_key(b, a)) or links.all

    def expected_p2p(self, src: int, dst: int) -> P2PCaps | None:
        """`all`, then each pasted `matrix` grid, then the pair's own entry: the later one wins per capability."""
        p2p = self.spec.p2p
        if p2p is None:
            return None
        stated = dict(p2p.all.stated()) if p2p.all else {}
        for capability, text in p2p.matrix.items():
            grid = parse_p2p_matrix(text)
            if max(src, dst) < len(grid):
                stated[capability] = grid[src][dst] == "OK"
        pair = p2p.pairs.get(pair_key(src, dst))
        if pair is not None:
            stated.update(pair.stated())
        return P2PCaps(**stated) if stated else None

    def expected_active_links(self, gpu: int) -> int | None:
        nvlink = self.spec.nvlink
        if nvlink is None:
            return None
        return nvlink.active_links_per_gpu.get(gpu_key(gpu), nvlink.active_links)

    def expected_nic(self, gpu: int) -> NicAffinity | None:
        affinity = self.spec.affinity
        if affinity is None:
            return None
        return affinity.nic.get(gpu_key(gpu)) or affinity.nic.get("all")

    def inactive_links_by_design(self, gpu: int) -> set[int]:
        nvlink = self.spec.nvlink
        return set(nvlink.inactive_by_design.get(gpu_key(gpu), [])) if nvlink else set()

    def where(self, key_path: str) -> str:
        """The provenance comment of a key, for reports: '' where the profile gives none."""
        return self.provenance.get(key_path, "")
