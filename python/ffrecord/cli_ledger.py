"""The ``ffrecord`` commands over loader states (``ffrecord.ledger``): ``ledger`` prints the
samples of some steps (after a loss spike, say), ``audit`` checks a set of rank states for
samples delivered twice or never. ``ffrecord.cli`` registers them and maps their errors to
its exit statuses (a state that cannot be used, or of another dataset: 2).

>>> from ffrecord.cli import main
>>> main(["ledger", "state.json", "--steps", "100:102"])          # doctest: +SKIP
epoch	step	rank	index	member	member_index	name	status
3	100	0	51234	2	8812	mix/wiki	delivered
…
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

EXIT_OK = 0
EXIT_FOUND = 1  # the audit found samples delivered twice or never


def add_ledger_commands(command: Callable[[str, Callable, str], argparse.ArgumentParser]) -> None:
    ledger = command("ledger", _ledger, "Print the samples of some steps of a DataLoader state's epoch: each "
                                        "rank's dataset indices and, for a Mixture, member and index in it; "
                                        "from the state alone (see docs/torch-and-resume.md).")
    ledger.add_argument("state", metavar="STATE", help="a state_dict() saved as JSON, or a torch checkpoint "
                                                       "holding one")
    ledger.add_argument("--steps", required=True, type=_steps, metavar="A:B",
                        help="steps A to B-1 (or one step A) of the state's epoch, counted as its 'step' is")
    ledger.add_argument("--rank", type=int, default=None, help="one rank's samples (default: every rank's)")
    ledger.add_argument("--epoch", type=int, default=None, help="another epoch than the state's (not for a "
                                                                "generator's order)")
    ledger.add_argument("--dataset", nargs="+", metavar="PATH", default=None,
                        help="check that the state was taken on this dataset (a mixture: its members' paths, "
                             "in order) before printing")
    ledger.add_argument("--json", action="store_true", help="one JSON object per sample")

    audit = command("audit", _audit, "Check the DataLoader states of every rank of a job, taken at one "
                                     "checkpoint, for samples of their epoch delivered twice or never "
                                     "(exit status 1 when some were). See docs/torch-and-resume.md.")
    audit.add_argument("states", nargs="+", metavar="STATE", help="one state per rank (JSON or torch checkpoint)")


def _steps(text: str) -> range:
    first, _, last = text.partition(":")
    try:
        a = int(first)
        b = int(last) if last else a + 1
    except ValueError:
        raise argparse.ArgumentTypeError(f"steps must be A:B or A, got {text!r}") from None
    if not 0 <= a < b:
        raise argparse.ArgumentTypeError(f"steps A:B need 0 <= A < B, got {text!r}")
    return range(a, b)


def _ledger(args: argparse.Namespace) -> int:
    from .ledger import Ledger, check_dataset, load

    ledger = Ledger(load(args.state))
    if args.dataset:
        check_dataset(ledger, args.dataset)
    columns: list[str] | None = None
    for row in ledger.rows(args.steps, args.rank, args.epoch):
        if args.json:
            print(json.dumps(row))
            continue
        if columns is None:
            columns = list(row)
            print("\t".join(columns))
        print("\t".join(_cell(row[c]) for c in columns))
    return EXIT_OK


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _audit(args: argparse.Namespace) -> int:
    from .ledger import audit, load

    ledger, report = audit([load(path) for path in args.states])
    for line in report.lines(ledger):
        print(line)
    sys.stdout.flush()
    return EXIT_OK if report.clean else EXIT_FOUND
