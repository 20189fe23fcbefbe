#!/usr/bin/env bash
# The main job on the built-in default model (tiny-gqa): install what is
# missing, build, compile the model, and generate tokens with it on the
# reference device, starting from the fixture's prompt.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh >/dev/null
build/bin/kiln compile tiny-gqa
build/bin/kiln run tiny-gqa --device ref --max-new-tokens 20 \
  --prompt-ids 151,9,163,192,311,258,239,87,314,185,252,19
