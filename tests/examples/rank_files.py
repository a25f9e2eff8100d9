#!/usr/bin/python3
"""Rank files of cairn's distributed checkpoints, read with the Python standard library alone.

    rank_files.py same DIR_A DIR_B   every rank file (every safetensors file, for a directory
                                     without rank files) holds the same tensors (bytes) and the
                                     same header metadata, items included, but the save's random
                                     identity (cairn.save_id); exit 1 naming what differs
    rank_files.py strip-items DIR [RANK]
                                     makes DIR what a cairn without items saved: no item in the
                                     rank files' headers (rank RANK's alone, if given; tensors
                                     untouched), and its completion marker as such a cairn wrote
                                     it (each file's size alone)
"""
import glob
import json
import os
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + size]), data[8 + size :]


def same(a, b):
    pattern = "rank_*.safetensors" if glob.glob(os.path.join(a, "rank_*.safetensors")) else "*.safetensors"
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(a, pattern)))
    if not names or names != sorted(os.path.basename(p) for p in glob.glob(os.path.join(b, pattern))):
        print("other files: %s" % names)
        return 1
    problems = []
    for name in names:
        (ha, da), (hb, db) = read(os.path.join(a, name)), read(os.path.join(b, name))
        ma, mb = ha.pop("__metadata__", {}), hb.pop("__metadata__", {})
        ma.pop("cairn.save_id", None), mb.pop("cairn.save_id", None)
        if ha != hb or da != db:
            problems.append(name + ": tensors differ")
        for key in sorted(set(ma) | set(mb)):
            if ma.get(key) != mb.get(key):
                problems.append(name + ": " + key + " differs")
    items = sum(1 for name in names for key in read(os.path.join(a, name))[0].get("__metadata__", {}) if key.startswith("cairn.item:"))
    print("%d files, %d items: %s" % (len(names), items, "; ".join(problems) or "the same"))
    return 1 if problems else 0


def strip_items(directory, rank=None):
    pattern = "rank_%d.safetensors" % rank if rank is not None else "rank_*.safetensors"
    for path in glob.glob(os.path.join(directory, pattern)):
        header, data = read(path)
        metadata = header["__metadata__"]
        for key in [k for k in metadata if k.startswith("cairn.item")]:
            del metadata[key]
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + data)
    marker = os.path.join(directory, "complete.json")
    document = json.load(open(marker))
    document["files"] = {name: os.path.getsize(os.path.join(directory, name)) for name in document["files"]}
    json.dump(document, open(marker, "w"), indent=2)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "same":
        sys.exit(same(sys.argv[2], sys.argv[3]))
    if len(sys.argv) in (3, 4) and sys.argv[1] == "strip-items":
        sys.exit(strip_items(sys.argv[2], *[int(r) for r in sys.argv[3:]]))
    print(__doc__)
    sys.exit(2)
