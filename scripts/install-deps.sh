#!/usr/bin/env bash
# Installs the Debian packages kiln builds against, then cuobjdump and
# nvdisasm for the SASS audit (install-sass-tools.sh) and the server
# tests' Python client (install-test-venv.sh); idempotent: does nothing
# when they are all present. CUDA is expected in /usr/local/cuda.
set -euo pipefail
pkgs=(cmake ninja-build ccache g++ python3 python3-numpy python3-venv
      libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools clang-19 lld-19
      libabsl-dev nlohmann-json3-dev libboost-dev libboost-context-dev libgraphviz-dev graphviz pkg-config libgtest-dev
      libsentencepiece-dev sentencepiece libclang-rt-19-dev curl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kiln: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -d /usr/local/cuda ]; then
  echo "kiln: the CUDA toolkit is expected in /usr/local/cuda" >&2
  exit 1
fi
"$(dirname "$0")/install-sass-tools.sh"
"$(dirname "$0")/install-test-venv.sh"
