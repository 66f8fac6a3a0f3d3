#!/usr/bin/env bash
# The wheels a lent GPU machine lacks (it has no network; its image holds torch, pytest, pyyaml,
# nvidia-ml-py, jinja2, markupsafe, packaging): downloaded here into .whl/ (git-ignored), which a
# `device` run names in `carry`; scripts/gpu-session.sh installs them and this checkout there.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  pydantic==2.14.3 pydantic_core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5 typing_extensions==4.16.0 \
  junit-xml==1.9 six==1.17.0 plotly==7.1.0 narwhals==2.29.0 duckdb==2.0.1
# py-spy, for `scripts/gpu-session.sh TAG run-profile`: where a run's own process waits
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation py \
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 -d .whl py-spy==0.4.3
ls .whl
