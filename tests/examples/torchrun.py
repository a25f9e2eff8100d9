"""torchrun (python3 -m torch.distributed.run) of Debian's python3-torch, runnable on Python 3.11.

torch 1.13 reads --redirects and --tee with Std.from_str, which on Python 3.11 returns None for
"0" and "3" (iterating an IntFlag no longer yields its zero and its composite members), and the
launcher then fails before it starts a worker ("'NoneType' object has no attribute 'get'").
This reads those two options itself and hands everything else to torchrun unchanged:

    python3 torchrun.py --nproc-per-node 2 --no-python PROGRAM ARGS...
"""
import re
import sys

from torch.distributed import run
from torch.distributed.elastic.multiprocessing import api


def read_std(text):
    if re.fullmatch(r"[0-3]", text):
        return api.Std(int(text))
    if re.fullmatch(r"([0-9]+:[0-3])(,[0-9]+:[0-3])*", text):
        return {int(rank): api.Std(int(value)) for rank, value in (item.split(":") for item in text.split(","))}
    raise ValueError(f"--redirects/--tee: '{text}' is neither 0-3 nor local_rank:0-3,...")


api.Std.from_str = staticmethod(read_std)

if __name__ == "__main__":
    sys.exit(run.main())
