"""Mixtures of a thousand sources (issue 35): a ``Mixture.from_paths`` of ``--members``
datasets under a weight schedule of 10 changes, read by 2 ranks × 2 worker processes in the
mixture's own order, against one plain dataset holding the same datapoints (read shuffled,
``seed=``); the descriptors and memory each rank holds (its process and its workers'); and
the time to compute the ledger of one step at 10⁹ datapoints.

Every member holds ``--per-member`` datapoints ``{tokens: --bytes bytes, label: int}`` (tiny,
for a 2-core machine: a batch's cost is then the reads' own, not the bytes'). Weights: each
step of the schedule draws them at random, ``--weights uniform`` (about equal) or ``zipf``
(member ``j`` weighs ``1 / (j + 1)``, shuffled: a few sources weigh most, as in language-model
mixtures); a pattern of 65,536 places, so that the smallest weights keep their share. The
mixture is as long as the plain dataset (``length=``: a member that runs out starts again,
as a small source upsampled does). The table of open files keeps its bound (``--bound``, default the library's: 128
files) unless given. Each rank is a fresh process; both run at once; each reads ``--epochs``
epochs with persistent workers after a first one and times them (the first is reported apart:
its workers start, and open each member the first time they read it: a training run pays that
once, then reads for days; an epoch of the default sizes lasts about 0.1 s, too short alone to
time on a shared machine); descriptors and memory are the most seen in the timed epochs. A round runs the
mixture then the plain dataset, ``--rounds`` rounds, the best round of each reported and
the ratio of their medians.

    python benchmarks/mixtures.py [--members 1000] [--per-member 48] [--bytes 64]
                                  [--weights uniform,zipf] [--bound 128] [--rounds 3] [--epochs 5]

Goals (issue 35): samples/s at least 0.8× the plain dataset's; at most 256 descriptors and
300 MiB more memory than the plain dataset's per rank; the ledger of one step at 10⁹
datapoints within 1 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

SPEC = {"tokens": "bytes", "label": "int"}
BATCH, WORLD, WORKERS, CHANGES = 64, 2, 2, 10


def weights_of(kind: str, members: int, seed: int) -> list[float]:
    import numpy as np

    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return (0.5 + rng.random(members)).tolist()
    return rng.permutation(1.0 / np.arange(1, members + 1)).tolist()


def schedule_of(kind: str, members: int, length: int) -> list[tuple[int, list[float]]]:
    """10 changes, evenly spread over ``length`` positions."""
    return [(length * (k + 1) // (CHANGES + 1), weights_of(kind, members, k + 1)) for k in range(CHANGES)]


def write(root: Path, members: int, per_member: int, size: int) -> tuple[list[str], str]:
    from ffrecord.dataset import DatasetWriter

    paths = []
    for j in range(members):
        path = root / "members" / f"{j:05d}"
        with DatasetWriter(path, SPEC, durable=False) as writer:
            for k in range(per_member):
                writer.append({"tokens": bytes([j % 251]) * size, "label": k})
        paths.append(str(path))
    plain = root / "plain"
    with DatasetWriter(plain, SPEC, durable=False) as writer:
        for j in range(members):
            for k in range(per_member):
                writer.append({"tokens": bytes([j % 251]) * size, "label": k})
    return paths, str(plain)


# -- one rank, in a process of its own ------------------------------------------------------


def _held(pid: int) -> tuple[int, int]:
    """The most descriptors any one of process ``pid`` and its children (loader workers)
    holds, and the resident bytes of them all."""
    pids = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            pids += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            pass
    fds = rss = 0
    for p in pids:
        try:
            fds = max(fds, len(os.listdir(f"/proc/{p}/fd")))
            rss += next(int(line.split()[1]) << 10 for line in Path(f"/proc/{p}/status").read_text().splitlines()
                        if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return fds, rss


def child(args: argparse.Namespace) -> None:
    from ffrecord.dataset import DatasetReader, Mixture, set_max_open_files
    from ffrecord.dataset.mixture_map import MAX_PERIOD
    from ffrecord.torch import DataLoader, StructuredDataset

    if args.bound:
        set_max_open_files(args.bound)
    start = time.perf_counter()
    if args.kind == "plain":
        data = DatasetReader(args.plain)
        options: dict[str, Any] = {"shuffle": True, "seed": 1}
    else:
        paths = json.loads(Path(args.paths).read_text())
        length = len(paths) * args.per_member
        data = Mixture.from_paths(paths, weights_of(args.kind, len(paths), 0), period=MAX_PERIOD, length=length,
                                  schedule=schedule_of(args.kind, len(paths), length))
        options = {"shuffle": False}
    opened = time.perf_counter() - start
    loader = DataLoader(StructuredDataset(data), batch_size=BATCH, num_workers=WORKERS, rank=args.rank,
                        world_size=WORLD, persistent_workers=True, **options)
    began = time.perf_counter()
    for _ in loader:  # the first epoch: workers start and open each member the first time they read it
        pass
    first = time.perf_counter() - began
    most_fds, most_rss = _held(os.getpid())
    begin = time.perf_counter()
    for _ in range(args.epochs):
        for k, _ in enumerate(loader):
            if k % 10 == 0:
                fds, rss = _held(os.getpid())
                most_fds, most_rss = max(most_fds, fds), max(most_rss, rss)
    elapsed = time.perf_counter() - begin
    print(json.dumps({"samples_per_s": args.epochs * len(loader) * BATCH / elapsed, "open_s": opened,
                      "first_s": first, "fds": most_fds, "rss": most_rss}))


def run_ranks(script: str, kind: str, common: list[str]) -> dict[str, float]:
    """Both ranks at once; the job's samples/s is the sum of theirs."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    procs = [subprocess.Popen([sys.executable, script, "--child", kind, "--rank", str(r), *common],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for r in range(WORLD)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode:
            raise RuntimeError(f"{kind} rank failed: {err[-3000:]}")
        outs.append(json.loads(out.splitlines()[-1]))
    return {"samples_per_s": sum(o["samples_per_s"] for o in outs), "fds": max(o["fds"] for o in outs),
            "rss": max(o["rss"] for o in outs), "open_s": max(o["open_s"] for o in outs),
            "first_s": max(o["first_s"] for o in outs)}


# -- the ledger at 10^9 datapoints ------------------------------------------------------------


def ledger_timing(members: int) -> dict[str, float]:
    """Microseconds to compute the indices of one step of every rank (2 ranks × 1,024) and
    locate each in a mixture of ``members`` members totalling 10⁹ datapoints under a schedule
    of 10 changes: through the loader (``DataLoader.indices`` + ``Mixture.locate``'s map)
    and from its state alone (``ffrecord.ledger.Ledger``), sequential and shuffled."""
    import numpy as np

    from ffrecord.dataset import Mixture
    from ffrecord.ledger import Ledger
    from ffrecord.torch import DataLoader

    per = 10**9 // members
    mix = Mixture([range(per)] * members, weights_of("zipf", members, 0), period=members,
                  schedule=schedule_of("uniform", members, 9 * 10**8), length=10**9)
    out = {}
    for shuffle in (False, True):
        loader = DataLoader(mix, batch_size=1024, world_size=2, rank=0, shuffle=shuffle, seed=0 if shuffle else None)
        ledger = Ledger(json.loads(json.dumps(loader.state_dict())))
        steps = np.random.default_rng(0).integers(0, len(loader), 20).tolist()
        for name, compute in (("loader", lambda s: [mix.map.route(np.asarray(b)) for b in loader.indices(0, s)]),
                              ("state", lambda s: [ledger.locate(b) for b in ledger.indices(s)])):
            times = []
            for step in steps:
                began = time.perf_counter()
                compute(step)
                times.append(time.perf_counter() - began)
            out[f"{name}, {'shuffled' if shuffle else 'sequential'}"] = statistics.median(times) * 1e6
    return out


# -- the driver -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--per-member", type=int, default=48)
    parser.add_argument("--bytes", type=int, default=64)
    parser.add_argument("--weights", default="uniform,zipf")
    parser.add_argument("--bound", type=int, default=0, help="the table's bound on open files (0: the library's)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5, help="epochs timed after the first")
    parser.add_argument("--ledger-members", type=int, default=1000)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--paths", default="", help=argparse.SUPPRESS)
    parser.add_argument("--plain", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.kind = args.child
        child(args)
        return
    script = str(Path(__file__).resolve())
    print(f"# {args.members} members × {args.per_member} datapoints of {args.bytes} bytes, {CHANGES} weight changes, "
          f"{WORLD} ranks × {WORKERS} workers, batch {BATCH}, bound {args.bound or 'default'}; cores: {os.cpu_count()}")
    with tempfile.TemporaryDirectory(prefix="ffrecord-mixtures-") as tmp:
        began = time.perf_counter()
        paths, plain = write(Path(tmp), args.members, args.per_member, args.bytes)
        (Path(tmp) / "paths.json").write_text(json.dumps(paths))
        print(f"# written in {time.perf_counter() - began:.1f} s")
        common = ["--paths", str(Path(tmp) / "paths.json"), "--plain", plain, "--per-member", str(args.per_member),
                  "--bound", str(args.bound), "--epochs", str(args.epochs)]
        kinds = [k for k in args.weights.split(",") if k]
        rounds: dict[str, list[dict[str, float]]] = {k: [] for k in [*kinds, "plain"]}
        for _ in range(args.rounds):
            for kind in rounds:
                rounds[kind].append(run_ranks(script, kind, common))
    best = {kind: max(rs, key=lambda r: r["samples_per_s"]) for kind, rs in rounds.items()}
    plain_rate = statistics.median(r["samples_per_s"] for r in rounds["plain"])
    print("\n| dataset | samples/s (best) | × plain (medians) | descriptors (most, of one process) | "
          "RSS MiB (rank + its workers) | open s | first epoch s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    ratios = {}
    for kind, result in best.items():
        ratios[kind] = statistics.median(r["samples_per_s"] for r in rounds[kind]) / plain_rate
        label = "plain (one dataset, shuffled)" if kind == "plain" else f"mixture, {kind} weights"
        print(f"| {label} | {result['samples_per_s']:,.0f} | {ratios[kind]:.2f} | {result['fds']} | "
              f"{result['rss'] / 2**20:.0f} | {result['open_s']:.2f} | {result['first_s']:.2f} |")
    timing = ledger_timing(args.ledger_members)
    print(f"\nThe ledger of one step (2 ranks × 1,024), {args.ledger_members} members, 10⁹ datapoints, "
          "median of 20 steps:")
    for name, micro in timing.items():
        print(f"- {name}: {micro:,.0f} µs")
    plain_best = best["plain"]
    print("\nGoals:")
    for kind in kinds:
        print(f"- {kind} weights: samples/s {ratios[kind]:.2f}× the plain dataset's (goal 0.8): "
              f"{'met' if ratios[kind] >= 0.8 else 'NOT met'}")
        fds, extra = best[kind]["fds"], (best[kind]["rss"] - plain_best["rss"]) / 2**20
        print(f"- {kind} weights: {fds} descriptors at most in one process (goal 256): "
              f"{'met' if fds <= 256 else 'NOT met'}; {extra:.0f} MiB more than the plain dataset's, a rank and "
              f"its workers (goal 300): {'met' if extra <= 300 else 'NOT met'}")
    slowest = max(timing.values())
    print(f"- the ledger of one step within 1 ms: {slowest:,.0f} µs at most: {'met' if slowest <= 1000 else 'NOT met'}")


if __name__ == "__main__":
    main()
