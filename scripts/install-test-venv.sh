#!/usr/bin/env bash
# Installs the Python packages the server's tests drive it with (the
# official `openai` client, docs/serve.md) into a virtual environment at
# build/test-venv; lit's %serve-python runs it. Idempotent: does nothing
# when these versions are installed.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=("openai==3.63.0")
dir=build/test-venv
stamp="$dir/installed-$(echo "${packages[*]}" | tr ' =' '_-')"
if [ -f "$stamp" ] && [ -x "$dir/bin/python" ]; then
  exit 0
fi
echo "kiln: installing ${packages[*]} into $dir"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
# Debian's Python (python3-venv), not whatever python3 comes first on PATH.
/usr/bin/python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}"
"$dir/bin/python" -c "import openai"
touch "$stamp"
