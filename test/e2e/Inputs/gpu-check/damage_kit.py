#!/usr/bin/env python3
"""damage_kit.py KIT: damages an emu GPU kit (scripts/build-gpu-kit.sh
--emu) where gpu_check.sh must report it: tiny-mha.kiln and the tuning
candidate in cand/ are cut to half their size (a bundle that does not
load, as a fault or a refused launch would on a GPU)."""
import os, sys, tarfile, tempfile

kit = sys.argv[1]


def cut(path):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2])


cut(os.path.join(kit, "tiny-mha.kiln"))
with tempfile.TemporaryDirectory() as tmp:
    tarball = os.path.join(kit, "cand.tar.xz")
    with tarfile.open(tarball) as t:
        t.extractall(tmp)
    cut(os.path.join(tmp, "cand", "decode.attention-0.kiln"))
    with tarfile.open(tarball, "w:xz") as t:
        for d in sorted(os.listdir(tmp)):
            t.add(os.path.join(tmp, d), d)
