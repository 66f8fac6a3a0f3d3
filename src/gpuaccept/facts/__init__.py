"""Facts: what was found on a machine, as frozen records with an exact JSON round trip."""

from gpuaccept.facts.io import dump_facts, load_facts, parse_facts, save_facts
from gpuaccept.facts.model import Facts
from gpuaccept.facts.record import Unavailable, is_known

__all__ = ["Facts", "Unavailable", "dump_facts", "is_known", "load_facts", "parse_facts", "save_facts"]
