"""Profiles: what a machine must be, loaded strictly from YAML."""

from gpuaccept.profile.catalog import ProfileCatalog
from gpuaccept.profile.load import check_base_profile, load_profile
from gpuaccept.profile.model import Profile

__all__ = ["Profile", "ProfileCatalog", "check_base_profile", "load_profile"]
