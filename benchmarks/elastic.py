"""Elastic resume side by side: ffrecord, MosaicML Streaming, LitData (reported, not timed).

One shuffled epoch of N samples (each sample holds its own id) read on three topologies in a
row: 2 ranks × batch 4 take 3 batches and checkpoint; 1 rank × batch 5 resumes from that
state, takes 2 batches and checkpoints; 3 ranks × batch 3 resume and finish the epoch. Each
rank of each phase is a fresh process (``--child``), as after a preemption. The table says,
for each loader, whether it refused a state, how many samples delivered before a checkpoint
came again after it, how many were delivered twice within the last segment (padding to equal
batch counts, as ``DistributedSampler`` does) and how many were never delivered.

    python benchmarks/elastic.py [--n 200] [--contenders ffrecord,streaming,litdata]

Streaming and LitData come from PyPI (``pip install "ffrecord[bench]"``); a contender whose
package is missing is reported as such.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PHASES = [  # (world size, batch size, batches to take; -1: the rest of the epoch)
    (2, 4, 3),
    (1, 5, 2),
    (3, 3, -1),
]
SEED = 7
NOTES = {"litdata": "drop_last=True in every phase (its default differs between 1 and more ranks, and it "
                    "refuses a state across that change)",
         "streaming": "num_canonical_nodes=2"}


# -- writing the same samples for each contender ------------------------------------------


def write(contender: str, root: Path, n: int) -> Path:
    import numpy as np

    out = root / contender
    if contender == "ffrecord":
        from ffrecord import FileWriter

        with FileWriter(out.with_suffix(".ffr"), n) as writer:
            for i in range(n):
                writer.write_one(np.int64(i).tobytes())
        return out.with_suffix(".ffr")
    if contender == "streaming":
        from streaming import MDSWriter

        with MDSWriter(out=str(out), columns={"id": "int64"}, size_limit=1 << 10) as writer:
            for i in range(n):
                writer.write({"id": np.int64(i)})
        return out
    if contender == "litdata":
        from litdata.streaming.writer import BinaryWriter

        writer = BinaryWriter(str(out), chunk_size=32)
        for i in range(n):
            writer.add_item(i, {"id": i})
        writer.done()
        writer.merge()
        return out
    raise ValueError(contender)


# -- one rank of one phase, in a process of its own ---------------------------------------


def child(contender: str, data: str, rank: int, world: int, batch_size: int, steps: int,
          state_in: str, state_out: str) -> None:
    state = json.loads(Path(state_in).read_text()) if state_in and Path(state_in).exists() else None
    result: dict[str, Any] = {"ids": [], "refused": None}
    if world > 1:  # every loader finds its rank where training code has it: torch.distributed
        import torch.distributed as dist

        dist.init_process_group("gloo")
    try:
        batches, new_state = globals()[f"run_{contender}"](data, rank, world, batch_size, steps, state)
        result["ids"] = [int(i) for batch in batches for i in batch]
        if new_state is not None and rank == min(1, world - 1):
            Path(state_out).write_text(json.dumps(new_state, default=int))
    except Exception as e:  # noqa: BLE001 - a refusal is the answer we report
        result["refused"] = f"{type(e).__name__}: {e}"[:200]
    print(json.dumps(result))


def _take(loader: Any, steps: int) -> list[list[int]]:
    out = []
    for batch in loader:
        out.append([int(i) for i in (batch["id"] if isinstance(batch, dict) else batch)])
        if len(out) == steps:
            break
    return out


def run_ffrecord(data: str, rank: int, world: int, batch_size: int, steps: int, state: Any) -> tuple:
    import numpy as np

    from ffrecord.torch import DataLoader, Dataset

    class Ids(Dataset):
        def process_batch(self, indices: Any, buffer: Any, offsets: Any) -> Any:
            return buffer.view(np.int64)

    loader = DataLoader(Ids(data), batch_size=batch_size, shuffle=True, seed=SEED)
    if state is not None:
        loader.load_state_dict(state)
    batches = _take(loader, steps)
    return batches, loader.state_dict()


def run_streaming(data: str, rank: int, world: int, batch_size: int, steps: int, state: Any) -> tuple:
    import torch.utils.data
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    dataset = StreamingDataset(local=data, shuffle=True, shuffle_seed=SEED, batch_size=batch_size,
                               num_canonical_nodes=2)
    if state is not None:
        dataset.load_state_dict(state)
    batches = _take(torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=0), steps)
    return batches, dataset.state_dict(len(batches) * batch_size * world, from_beginning=False)


def run_litdata(data: str, rank: int, world: int, batch_size: int, steps: int, state: Any) -> tuple:
    from litdata import StreamingDataLoader, StreamingDataset

    # drop_last fixed: LitData sets it for world_size > 1 only, and refuses a state across that change
    dataset = StreamingDataset(input_dir=data, shuffle=True, seed=SEED, drop_last=True)
    loader = StreamingDataLoader(dataset, batch_size=batch_size, num_workers=0)
    if state is not None:
        loader.load_state_dict(state)
    batches = _take(loader, steps)
    return batches, loader.state_dict()


# -- the scenario ---------------------------------------------------------------------------


def scenario(contender: str, root: Path, n: int) -> dict[str, Any]:
    try:
        data = write(contender, root, n)
    except ImportError as e:
        return {"contender": contender, "outcome": f"not installed ({e.name})"}
    state_file = root / f"{contender}.state.json"
    delivered: list[int] = []
    refused = []
    last_phase = 0  # ids delivered in the last phase (rank 0's count × ranks)
    for phase, (world, batch_size, steps) in enumerate(PHASES):
        port = str(_free_port())
        ranks = []
        for rank in range(world):  # the ranks of a phase run together, as torchrun starts them
            command = [sys.executable, __file__, "--child", contender, str(data), str(rank), str(world),
                       str(batch_size), str(steps), str(state_file), str(state_file) + f".{phase}"]
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            ranks.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        for rank, process in enumerate(ranks):
            out, err = process.communicate(timeout=300)
            if process.returncode != 0:
                refused.append(f"phase {phase} rank {rank}: exit {process.returncode}: {err.strip()[-200:]}")
                continue
            result = json.loads(out.strip().splitlines()[-1])
            delivered += result["ids"]
            last_phase = len(result["ids"]) * world if rank == 0 else last_phase
            if result["refused"]:
                refused.append(f"phase {phase} rank {rank}: {result['refused']}")
        written = Path(str(state_file) + f".{phase}")
        if written.exists():
            written.replace(state_file)
    counts = collections.Counter(delivered)
    before_last = set(delivered[:len(delivered) - last_phase])
    across = sum(1 for i in delivered[len(delivered) - last_phase:] if i in before_last)
    repeated = sum(c - 1 for c in counts.values())
    lost = n - len(counts)
    if refused:
        outcome = "refuses"
    elif across == lost == 0:  # repeats within the last segment only: padding to equal batch counts
        outcome = "resumes exactly"
    else:
        outcome = f"repeats {across}, loses {lost}"
    return {"contender": contender, "outcome": outcome, "delivered": len(delivered), "across": across,
            "padded": repeated - across, "lost": lost, "refused": refused}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        contender, data, rank, world, batch_size, steps, state_in, state_out = sys.argv[2:10]
        child(contender, data, int(rank), int(world), int(batch_size), int(steps), state_in, state_out)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--contenders", default="ffrecord,streaming,litdata")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [scenario(c, Path(tmp), args.n) for c in args.contenders.split(",")]
    print(f"Elastic resume, {args.n} samples, one epoch: 2 ranks x batch 4 (3 batches) -> "
          f"1 rank x batch 5 (2 batches) -> 3 ranks x batch 3 (rest)\n")
    print("| loader | outcome | delivered | repeated across checkpoints | padded in the last segment | lost | note |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        note = "; ".join(row.get("refused") or []) or NOTES.get(row["contender"], "")
        print(f"| {row['contender']} | {row['outcome']} | {row.get('delivered', '')} | {row.get('across', '')} "
              f"| {row.get('padded', '')} | {row.get('lost', '')} | {note} |")


if __name__ == "__main__":
    main()
