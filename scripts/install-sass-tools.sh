#!/usr/bin/env bash
# Installs cuobjdump and nvdisasm, which kiln inspect --sass runs
# (docs/sass-audit.md), from NVIDIA's PyPI wheels into a virtual environment
# at build/sass-tools/venv; build/sass-tools/bin links to the folder that
# holds both (CMake's KILN_SASS_TOOLS_DIR points there). No GPU is needed.
# Idempotent: does nothing when this version is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# The wheels exist for CUDA 13 from 13.2.51 on (pip index versions
# nvidia-cuda-cuobjdump); they read the CUBINs of NVRTC 13.0.
version=13.2.51
dir=build/sass-tools
stamp=$dir/installed-$version
if [ -f "$stamp" ] && [ -x "$dir/bin/cuobjdump" ] && [ -x "$dir/bin/nvdisasm" ]; then
  exit 0
fi
echo "kiln: installing cuobjdump and nvdisasm $version into $dir"
rm -rf "$dir"
mkdir -p "$dir"
# Debian's Python (python3-venv), not whatever python3 comes first on PATH.
/usr/bin/python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check \
  "nvidia-cuda-cuobjdump==$version" "nvidia-cuda-nvdisasm==$version"
bins=("$dir"/venv/lib/python3*/site-packages/nvidia/cu13/bin)
if [ ! -x "${bins[0]}/cuobjdump" ] || [ ! -x "${bins[0]}/nvdisasm" ]; then
  echo "kiln: the wheels did not install cuobjdump and nvdisasm in ${bins[0]}" >&2
  exit 1
fi
ln -sfn "${bins[0]#"$dir"/}" "$dir/bin" # relative: the clone may move
"$dir/bin/cuobjdump" --version >/dev/null
touch "$stamp"
