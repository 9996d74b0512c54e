"""One rank of the distributed test, started by ``torchrun --nproc_per_node=2``.

Usage: torchrun ... -m torch_scripts.ddp DATA OUT_DIR

Each rank records its batches of two epochs, saves a state two batches into epoch 1, resumes
from it in a fresh loader (from its own state and from the other rank's), and writes all of
that to ``OUT_DIR/rank<r>.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from torch_scripts.common import epoch_batches, indices_of, make_loader


def resume(data: str, state_file: Path) -> list[list[list[int]]]:
    loader = make_loader(data, shuffle=True)
    loader.load_state_dict(json.loads(state_file.read_text()))
    return [epoch_batches(loader) for _ in range(2)]


def main() -> None:
    data, out = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    loader = make_loader(data, shuffle=True)  # rank, world size and seed agree via torch.distributed
    epoch0 = epoch_batches(loader)
    iterator = iter(loader)
    head = [indices_of(next(iterator)) for _ in range(2)]
    (out / f"state{rank}.json").write_text(json.dumps(loader.state_dict()))
    rest = [epoch_batches(iterator), epoch_batches(loader)]
    dist.barrier()  # both states are on disk
    other = (rank + 1) % world_size
    record = {
        "world_size": world_size,
        "epochs": [epoch0, head + rest[0]],
        "expected_after_state": rest,
        "resumed_own": resume(data, out / f"state{rank}.json"),
        "resumed_other": resume(data, out / f"state{other}.json"),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
