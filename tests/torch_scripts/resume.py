"""Child process of the resume tests: a fresh loader loads a saved state and prints what follows.

Usage: python -m torch_scripts.resume DATA STATE_JSON --workers N --epochs E [--generator]

Prints the JSON list of the epochs it iterated, each a list of batches of sample indices.
"""

from __future__ import annotations

import argparse
import json

import torch

from torch_scripts.common import epoch_batches, make_loader


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("state")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--generator", action="store_true", help="order drawn from a torch.Generator")
    args = parser.parse_args()
    # A different generator seed than the saved run's: the loaded state must win.
    generator = torch.Generator().manual_seed(12345) if args.generator else None
    loader = make_loader(args.data, shuffle=True, num_workers=args.workers, generator=generator)
    with open(args.state) as f:
        loader.load_state_dict(json.load(f))
    print(json.dumps([epoch_batches(loader) for _ in range(args.epochs)]))


if __name__ == "__main__":
    main()
