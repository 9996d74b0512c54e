"""The ``ffrecord`` command: look inside, check, extract and create FFRecord files.

Run ``ffrecord --help`` or ``ffrecord COMMAND --help``. Exit status (every command):

====  =====================================================================
 0    success (for ``verify``: every file and every sample is intact)
 1    damaged data: a bad checksum, a corrupt or truncated file (for ``audit``: samples
      delivered twice or never)
 2    bad usage: unknown option, bad argument, sample index out of range
 3    a path is missing or the operating system refused an operation
130   interrupted (Ctrl-C)
141   standard output closed early (e.g. piped into ``head``)
====  =====================================================================

Example:
    >>> from ffrecord.cli import main
    >>> main(["--version"])                                         # doctest: +SKIP
    ffrecord 0.1.0
    0
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _paths, _remote
from ._progress import ProgressBar
from .errors import CorruptFileError

__all__ = ["main", "EXIT_OK", "EXIT_CORRUPT", "EXIT_USAGE", "EXIT_OS", "EXIT_INTERRUPTED",
           "EXIT_BROKEN_PIPE"]

EXIT_OK = 0
EXIT_CORRUPT = 1
EXIT_USAGE = 2
EXIT_OS = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by it

_EXIT_HELP = """exit status:
  0    success (verify: every file and sample intact)
  1    damaged data: bad checksum, corrupt or truncated file (audit: samples delivered
       twice or never)
  2    bad usage: bad option or argument, sample index out of range
  3    a path is missing or the operating system refused an operation
  130  interrupted
  141  standard output was closed early (e.g. piped into head)
"""

# verify checks this many samples per call: small enough for a lively progress bar and an
# even spread over --jobs threads, large enough that the per-call cost vanishes.
_VERIFY_CHUNK = 4096


class _UsageError(Exception):
    """A command-line argument the command cannot act on (exit status 2)."""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or an argparse usage error
        return int(exit_.code or 0)
    prog = f"ffrecord {args.command}"
    try:
        return args.run(args)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader of our output went away (e.g. `| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except CorruptFileError as exc:
        return _fail(prog, exc, EXIT_CORRUPT)
    except (_UsageError, IndexError, ValueError, TypeError, ImportError) as exc:
        return _fail(prog, exc, EXIT_USAGE)  # ImportError: a missing extra, named
    except OSError as exc:
        return _fail(prog, exc, EXIT_OS)


def _fail(prog: str, exc: BaseException, status: int) -> int:
    print(f"{prog}: error: {_message(exc)}", file=sys.stderr)
    return status


def _message(exc: BaseException) -> str:
    """What went wrong, once: an ``OSError`` whose text already names its file (the library's
    messages do) is shown without Python's ``[Errno N] …: 'file'`` around it."""
    if isinstance(exc, OSError) and exc.strerror and exc.filename and \
            os.fsdecode(exc.filename) in exc.strerror:
        return exc.strerror
    return str(exc)


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="ffrecord", epilog=_EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Inspect, verify, extract and create FFRecord (.ffr) files.")
    parser.add_argument("--version", action="version", version=f"ffrecord {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, run: Callable, help_: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_, description=help_, epilog=_EXIT_HELP,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.set_defaults(run=run)
        return sub

    info = command("info", _info, "Show sample counts, files, sizes and compression "
                                  "(for a structured dataset: its fields, types, counts and bytes).")
    info.add_argument("paths", nargs="+", metavar="FILE|DIR", type=_path,
                      help="an .ffr file, a directory of .ffr files read as one dataset, or a "
                           "structured dataset's directory")
    info.add_argument("--json", action="store_true", help="print one JSON object per path")

    plan = command("plan", _plan, "Print what an epoch will cost from object storage, per node and "
                                  "for the job: GETs, GETs/s on the prefix, bytes, cache needed, "
                                  "shuffle quality (see docs/object-storage.md).")
    plan.add_argument("paths", nargs="+", metavar="URL|FILE|DIR")
    # Numbers as typed: plan() checks each (a one-line error naming it, exit status 2).
    plan.add_argument("--nodes", type=_number, default=1)
    plan.add_argument("--gpus-per-node", type=_number, default=1)
    plan.add_argument("--batch-size", type=_number, default=64, help="per GPU")
    plan.add_argument("--samples-per-second", type=_number, default=10_000, help="of the whole job")
    plan.add_argument("--shuffle", choices=("chunk", "full"), default="chunk")
    plan.add_argument("--chunk-size", type=_number, default=16 << 20, help="bytes")
    plan.add_argument("--window", type=_number, default=8, help="chunks per shuffle window")
    plan.add_argument("--cache-limit", type=_number, default=None, help="bytes per node")
    plan.add_argument("--no-cache", dest="cached", action="store_false",
                      help="model readers without a chunk cache")

    verify = command("verify", _verify,
                     "Check the metadata and every sample checksum; list each bad sample. A "
                     "structured dataset is checked whole: its spec, every field file and its "
                     "datapoint count, every sequence's element table.")
    verify.add_argument("paths", nargs="+", metavar="FILE|DIR", type=_path)
    verify.add_argument("-j", "--jobs", type=_positive_int, default=os.cpu_count() or 1,
                        metavar="N", help="threads checking in parallel (default: CPU count)")
    verify.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")

    cat = command("cat", _cat, "Write the raw bytes of samples to standard output; for a "
                               "structured dataset, each datapoint as a line of JSON (binary "
                               "values summarised), or one field's bytes with --field.")
    cat.add_argument("file", metavar="FILE|DIR", type=_path)
    cat.add_argument("indices", nargs="+", metavar="INDEX",
                     help="sample (or datapoint) index, negative counting from the end, or "
                          "range START:STOP")
    cat.add_argument("--field", metavar="NAME",
                     help="structured dataset: write this field's stored bytes, raw (a "
                          "sequence's elements back to back)")
    cat.add_argument("--out", metavar="FILE", type=_path,
                     help="write to FILE instead of standard output")

    profile = command("profile", _profile, "Run a DataLoader for some batches with a training step that "
                                           "does nothing; print where its time goes (read, transform, "
                                           "collate, transfer), its ceiling throughput and the stage to "
                                           "fix (see docs/profiling.md).")
    from .profile import add_arguments

    add_arguments(profile)

    pack = command("pack", _pack, "Pack a folder into one .ffr file (pack_folder).")
    pack.add_argument("folder", metavar="FOLDER")
    pack.add_argument("out", metavar="OUT")
    pack.add_argument("-v", "--verbose", action="store_true", help="show progress")

    unpack = command("unpack", _unpack, "Extract a packed .ffr file into a directory.")
    unpack.add_argument("file", metavar="FILE")
    unpack.add_argument("out", metavar="DIR")
    unpack.add_argument("-v", "--verbose", action="store_true", help="show progress")

    convert = command("convert", None, "Convert other record formats into one .ffr file.")
    kinds = convert.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, help_ in (("tfrecord", "TFRecord files (both CRC-32C checksums verified)"),
                        ("ofrecord", "OneFlow OFRecord part-N files"),
                        ("folder", "a folder, as pack does")):
        sub = kinds.add_parser(kind, help=help_, description=f"Convert {help_} to OUT.",
                               epilog=_EXIT_HELP,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.set_defaults(run=_convert)
        sub.add_argument("inputs", nargs="+", metavar="INPUT",
                         help="input file or directory" + ("" if kind == "folder" else "(s)"))
        sub.add_argument("out", metavar="OUT", help="the .ffr file to write")
        sub.add_argument("-v", "--verbose", action="store_true", help="show progress")
        if kind != "folder":
            sub.add_argument("--compression", choices=("none", "lz4", "zstd"), default="none",
                             help="compress samples with LZ4 or Zstandard (default: none)")
        if kind == "tfrecord":
            sub.add_argument("--no-verify", dest="verify", action="store_false",
                             help="skip the CRC-32C checks (faster without a compiled CRC)")
    text = kinds.add_parser("text", help="JSONL or Parquet text, tokenized, into a token dataset",
                            description="Tokenize JSONL or Parquet documents into the token dataset OUT "
                                        "(see docs/tokens.md); rerun the same command to resume.",
                            epilog=_EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    text.set_defaults(run=_convert_text)
    text.add_argument("inputs", nargs="+", metavar="INPUT", help=".jsonl or .parquet file(s)")
    text.add_argument("out", metavar="OUT", help="the token dataset directory to write")
    text.add_argument("--tokenizer", default="bytes", metavar="MODULE:FUNCTION",
                      help="a function text -> token ids (default: bytes, the UTF-8 bytes)")
    text.add_argument("--vocab-size", type=_positive_int, help="token ids are below this (bytes: 256)")
    text.add_argument("--text-field", default="text", help="the field holding the text (default: text)")
    text.add_argument("--keep", action="append", default=[], metavar="FIELD",
                      help="a field to store beside the tokens (repeatable)")
    text.add_argument("--workers", type=int, default=None, help="tokenizing processes (default: CPUs)")
    text.add_argument("--shard-docs", type=_positive_int, default=100_000,
                      help="documents per shard, the unit of resumption (default: 100000)")
    text.add_argument("-v", "--verbose", action="store_true", help="show progress")
    from .cli_dataset import add_converters, add_show_and_view, add_version_commands
    from .cli_ledger import add_ledger_commands

    add_converters(kinds, _EXIT_HELP)
    add_show_and_view(command)
    add_version_commands(command)
    add_ledger_commands(command)
    return parser


def _path(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("an empty path (use . for the current directory)")
    return text


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _number(text: str) -> Any:
    """``text`` as the number it spells (an ``int`` when it is one, else a ``float``), else
    as it is, for the command's own checks to name."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _ffr_files(path: str) -> List[str]:
    """The files a path stands for: itself, or a directory's (or an ``s3://`` prefix's)
    ``*.ffr`` sorted by name. URLs are reached with the ``AWS_*`` environment's settings."""
    path = _remote.local_path(path)
    if _remote.is_url(path):
        from .reader import FileReader

        with FileReader(path, check_data=False) as reader:  # the core lists a prefix
            return list(reader.fnames)
    p = Path(_paths.fspath(path))
    if p.is_dir():
        files = _paths.dataset_files(p)
        if not files:
            raise _UsageError(f"{path}: directory holds no .ffr files")
        return files
    if not p.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    return [path]


# ---- info --------------------------------------------------------------------------------

def _info(args: argparse.Namespace) -> int:
    from .dataset import dataset_kind

    for path in args.paths:
        structured = dataset_kind(path) is not None
        summary = _summarize_dataset(path) if structured else _summarize(path)
        if args.json:
            print(json.dumps(summary))
        elif structured:
            _print_dataset(summary)
        else:
            _print_summary(summary)
    return EXIT_OK


def _summarize_dataset(path: str) -> Dict:
    """A structured dataset (``ffrecord.dataset``): its fields, counts and bytes per field."""
    from .dataset import dataset_kind, open_dataset
    from .dataset.display import field_sizes, size_stats, stored_decoders

    kind = dataset_kind(path)
    decoders = stored_decoders(_dataset_types(path, kind))
    with warnings.catch_warnings(), open_dataset(path, decoders=decoders) as dataset:
        warnings.simplefilter("ignore")  # e.g. a legacy file: `ffrecord verify` reports it
        shards = dataset.members if kind == "sharded" else [dataset]
        fields = []
        for name, spec in dataset.spec.items():
            field = shards[0].fields[name]
            entry = {"field": name, "type": spec, "datapoints": len(dataset),
                     "bytes": sum(s.field_reader(name).file_info(0).file_bytes for s in shards),
                     "compression": field.compression or "none"}
            if field.sequence:
                entry["elements"] = sum(int(s.element_counts(name).sum()) for s in shards)
            entry["sizes"] = size_stats(field_sizes(dataset, name))
            fields.append(entry)
    return {"path": path, "kind": kind, "shards": len(shards), "datapoints": len(dataset),
            "bytes": sum(f["bytes"] for f in fields), "fields": fields}


def _dataset_types(path: str, kind: Optional[str]) -> List[str]:
    """The type names of a dataset's fields, so that the CLI can choose decoders needing
    none of the user's codecs."""
    from .dataset import manifest
    from .dataset.reader import shard_directories
    from .dataset.spec import read_spec

    folder = _remote.as_path(path)
    loaded = manifest.load(folder)
    if loaded is not None:  # its fields may have grown since the shards' spec.json
        return [field.type for field in loaded.manifest.fields.values()]
    first = folder if kind == "dataset" else shard_directories(folder)[0]
    return [field.type for field in read_spec(first)[0].values()]


def _print_dataset(s: Dict) -> None:
    shards = f", {s['shards']} shards" if s["kind"] == "sharded" else ""
    print(f"{s['path']}  (structured dataset{shards})")
    print(f"  datapoints   {s['datapoints']:,}")
    print(f"  total size   {s['bytes']:,} bytes")
    width = max(len(f["field"]) for f in s["fields"])
    types = max(len(f["type"]) for f in s["fields"])
    for f in s["fields"]:
        elements = f"  {f['elements']:,} elements" if "elements" in f else ""
        print(f"    {f['field']:<{width}}  {f['type']:<{types}}  {f['bytes']:>14,} bytes{elements}")
        if f["sizes"]["count"]:
            st = f["sizes"]
            print(f"    {'':<{width}}  size min {st['min']:,}  median {st['median']:,.1f}  "
                  f"max {st['max']:,}  mean {st['mean']:,.1f} bytes")


def _summarize(path: str) -> Dict:
    import numpy as np

    from .packed import MAGIC

    files, all_sizes = [], []
    for fname in _ffr_files(path):
        with _open_reader(fname, check_data=False) as reader:
            sizes = reader.sizes(np.arange(len(reader), dtype=np.uint64))
            info = reader.file_info()
            n = len(reader)
            packed = n > 0 and reader.read_one(n - 1)[:len(MAGIC)].tobytes() == MAGIC
        all_sizes.append(sizes)
        files.append({"file": fname, "samples": int(len(sizes)), "bytes": info.file_bytes,
                      "sample_bytes": int(sizes.sum()), "stored_bytes": info.data_bytes,
                      "compression": info.compression, "metadata": info.metadata,
                      "packed_folder": packed})
    sizes = np.concatenate(all_sizes)
    stats = ({"min": int(sizes.min()), "median": float(np.median(sizes)),
              "max": int(sizes.max()), "mean": float(sizes.mean())} if len(sizes) else None)
    compressions = sorted({f["compression"] for f in files})
    return {"path": path, "samples": int(len(sizes)), "files": files,
            "bytes": sum(f["bytes"] for f in files),
            "sample_bytes": int(sizes.sum()),
            "stored_bytes": sum(f["stored_bytes"] for f in files),
            "sample_size": stats, "compression": "+".join(compressions)}


_METADATA_NOTES = {"legacy": "checksum 0 (old writer, not validated)",
                   "damaged": "checksum mismatch (run ffrecord verify)"}


def _print_summary(s: Dict) -> None:
    print(f"{s['path']}")
    print(f"  samples      {s['samples']:,}")
    print(f"  files        {len(s['files'])}")
    for f in s["files"]:
        extra = ", packed folder" if f["packed_folder"] else ""
        if f["metadata"] != "intact":
            extra += f", metadata {_METADATA_NOTES[f['metadata']]}"
        print(f"    {f['file']}  {f['samples']:,} samples  {f['bytes']:,} bytes  "
              f"{f['compression']}{extra}")
    print(f"  total size   {s['bytes']:,} bytes on disk, {s['sample_bytes']:,} bytes of samples")
    if s["sample_size"]:
        st = s["sample_size"]
        print(f"  sample size  min {st['min']:,}  median {st['median']:,.1f}  "
              f"max {st['max']:,}  mean {st['mean']:,.1f} bytes")
    ratio = ""
    if s["compression"] != "none" and s["stored_bytes"]:
        ratio = f" (samples stored in {s['stored_bytes']:,} bytes, " \
                f"ratio {s['sample_bytes'] / s['stored_bytes']:.2f}x)"
    print(f"  compression  {s['compression']}{ratio}")


# ---- verify ------------------------------------------------------------------------------

def _plan(args: argparse.Namespace) -> int:
    from .plan import print_plan

    paths = args.paths[0] if len(args.paths) == 1 else args.paths
    print_plan(paths, nodes=args.nodes, gpus_per_node=args.gpus_per_node, batch_size=args.batch_size,
               samples_per_second=args.samples_per_second, shuffle=args.shuffle,
               chunk_size=args.chunk_size, window=args.window, cached=args.cached,
               cache_limit=args.cache_limit)
    return 0


def _profile(args: argparse.Namespace) -> int:
    from .profile import run

    return run(args)


def _verify(args: argparse.Namespace) -> int:
    from .dataset import dataset_kind
    from .dataset.check import survey, table_damage

    files: List[str] = []
    sequence_files: List[str] = []
    damage: List[str] = []  # a structured dataset's: spec, missing files, counts, tables
    for path in args.paths:
        if dataset_kind(path) is None:
            files.extend(_ffr_files(path))
            continue
        found = survey(path)
        files.extend(found.files)
        sequence_files.extend(found.sequence_files)
        damage.extend(found.problems)
    readers: Dict[str, Any] = {}
    unreadable: Dict[str, str] = {}  # damaged beyond opening, or while reading
    refused: Dict[str, str] = {}  # the system would not let us open it: nothing is known
    bad: Dict[str, list] = {}
    try:
        for fname in files:
            try:
                readers[fname] = _open_reader(fname, check_data=False)
            except CorruptFileError as exc:
                unreadable[fname] = _message(exc)
            except OSError as exc:  # permission denied, vanished, no descriptors left...
                refused[fname] = _message(exc)
        chunks = [(fname, start, min(_VERIFY_CHUNK, len(r) - start))
                  for fname, r in readers.items() for start in range(0, len(r), _VERIFY_CHUNK)]
        nsamples = sum(c[2] for c in chunks)
        show = sys.stderr.isatty() if args.progress is None else args.progress
        with ProgressBar(nsamples, show, "verify") as bar, \
                ThreadPoolExecutor(args.jobs) as pool:
            for (fname, _, count), (found, failure) in pool.map(
                    lambda c: (c, _check_chunk(readers[c[0]], c[1], c[2])), chunks):
                bad.setdefault(fname, []).extend(found)
                if failure is not None:
                    unreadable.setdefault(fname, _message(failure))
                bar.update(count)
        for fname in sequence_files:
            if fname in readers and fname not in unreadable:
                skip = {sample.index for sample in bad.get(fname, [])}
                try:
                    damage.extend(table_damage(readers[fname], skip))
                except (CorruptFileError, OSError) as exc:
                    unreadable[fname] = _message(exc)
        for fname in files:  # report in file order, each problem once
            if fname in refused:
                print(f"{fname}: cannot open: {refused[fname]}")
            if fname in unreadable:
                print(f"{fname}: unreadable: {unreadable[fname]}")
            for sample in sorted(bad.get(fname, [])):
                print(sample.message)
        for problem in damage:
            print(problem)
    finally:
        for reader in readers.values():
            reader.close()
    nbad = sum(len(v) for v in bad.values())
    if unreadable or nbad or refused or damage:
        print(f"FAILED: {nbad} bad sample(s), {len(unreadable)} unreadable file(s), "
              f"{len(damage)} dataset problem(s) and {len(refused)} file(s) that could not be "
              f"opened among {len(files)} file(s)", file=sys.stderr)
        # Damage found is the stronger news; a file not opened proves nothing either way.
        return EXIT_CORRUPT if unreadable or nbad or damage else EXIT_OS
    print(f"OK: {len(files)} file(s), {nsamples:,} samples verified")
    return EXIT_OK


def _open_reader(fname: str, check_data: bool):
    """Opens one file, printing the reader's warnings (e.g. a legacy file) as plain lines."""
    from .reader import FileReader

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = FileReader(fname, check_data=check_data)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    return reader


def _check_chunk(reader, start: int, count: int):
    """The bad samples of one chunk, and the exception that stopped or followed the check
    (a file's damaged metadata, or a failure to read), if any."""
    found: list = []
    try:
        for sample in reader.bad_samples(start, count):
            found.append(sample)
    except (CorruptFileError, OSError) as exc:
        return found, exc
    return found, None


# ---- cat, pack, unpack, convert ----------------------------------------------------------

def _cat(args: argparse.Namespace) -> int:
    from .dataset import dataset_kind
    from .reader import FileReader

    kind = dataset_kind(args.file)
    if kind is None and args.field is not None:
        raise _UsageError(f"{args.file}: --field applies to a structured dataset's directory")
    out = open(args.out, "wb") if args.out else sys.stdout.buffer
    try:
        if kind is not None:
            _cat_dataset(args, kind, out)
        else:
            with FileReader(args.file, check_data=True) as reader:
                for index in _all_indices(args.indices, len(reader)):
                    out.write(reader.read_one(index))
        out.flush()
    except BaseException:
        if args.out:  # no partial output left behind
            out.close()
            os.unlink(args.out)
        raise
    if args.out:
        out.close()
    return EXIT_OK


def _cat_dataset(args: argparse.Namespace, kind: str, out: Any) -> None:
    """Datapoints as lines of JSON, or one field's bytes (``--field``)."""
    from .dataset import open_dataset
    from .dataset.display import display_decoders, format_datapoint, stored_decoders

    types = _dataset_types(args.file, kind)
    raw = args.field is not None
    decoders = stored_decoders(types) if raw else display_decoders(types)
    with open_dataset(args.file, decoders=decoders) as dataset:
        if raw and args.field not in dataset.spec:
            raise _UsageError(f"{args.file}: no field {args.field!r} (fields: "
                              f"{', '.join(dataset.spec)})")
        for index in _all_indices(args.indices, len(dataset)):
            if raw:
                value = dataset[index, [args.field]][args.field]
                if not isinstance(value, (bytes, list)):  # a column's value: its stored bytes
                    value = dataset.read_columns([index], [args.field])[args.field][0].tobytes()
                out.writelines(value if isinstance(value, list) else [value])
            else:
                out.write(format_datapoint(dataset[index]).encode() + b"\n")


def _all_indices(texts: List[str], n: int) -> List[int]:
    return [i for text in texts for i in _parse_indices(text, n)]


def _parse_indices(text: str, n: int) -> range:
    """``"5"`` → [5]; ``"-1"`` → [n-1]; ``"2:5"`` / ``":3"`` / ``"7:"`` → that range."""
    try:
        if ":" not in text:
            index = int(text)
            if not -n <= index < n:
                raise _UsageError(f"index {index} is out of range for {n} samples")
            return range(index % n, index % n + 1)
        start, stop = (int(part) if part else None for part in text.split(":", 1))
    except ValueError:
        raise _UsageError(f"{text!r} is not an index or START:STOP range") from None
    return range(n)[slice(start, stop)]


def _pack(args: argparse.Namespace) -> int:
    from .packed import pack_folder

    count = pack_folder(args.folder, args.out, args.verbose)
    print(f"packed {count} file(s) from {args.folder} into {args.out}")
    return EXIT_OK


def _unpack(args: argparse.Namespace) -> int:
    from .packed import unpack_folder

    count = unpack_folder(args.file, args.out, args.verbose)
    print(f"unpacked {count} file(s) from {args.file} into {args.out}")
    return EXIT_OK


def _convert(args: argparse.Namespace) -> int:
    from . import convert

    compression = None if getattr(args, "compression", "none") == "none" else args.compression
    if args.kind == "folder" and len(args.inputs) != 1:
        raise _UsageError(f"convert {args.kind} takes exactly one input directory")
    if args.kind == "folder":
        count = convert.folder_to_ffr(args.inputs[0], args.out, verbose=args.verbose)
    elif args.kind == "tfrecord":
        count = convert.tfrecord_to_ffr(args.inputs, args.out, verify=args.verify,
                                        compression=compression, verbose=args.verbose)
    else:
        count = convert.ofrecord_to_ffr(args.inputs, args.out, compression=compression,
                                        verbose=args.verbose)
    print(f"wrote {count:,} samples to {args.out}")
    return EXIT_OK


def _convert_text(args: argparse.Namespace) -> int:
    import importlib

    from . import tokens

    if args.tokenizer == "bytes":
        tokenizer, vocab_size = tokens.byte_tokenizer, args.vocab_size or 256
    else:
        module, _, name = args.tokenizer.partition(":")
        if not name or args.vocab_size is None:
            raise _UsageError("--tokenizer takes MODULE:FUNCTION, and needs --vocab-size")
        tokenizer, vocab_size = getattr(importlib.import_module(module), name), args.vocab_size
    stats = tokens.convert_text(args.inputs, args.out, tokenizer, vocab_size, text_field=args.text_field,
                                keep=args.keep, shard_docs=args.shard_docs, workers=args.workers,
                                progress=args.verbose)
    print(f"wrote {stats['documents']:,} documents ({stats['tokens']:,} tokens) to {args.out}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
