"""The ``ffrecord`` commands for structured datasets: ``convert KIND`` (from other dataset
formats, see ``ffrecord.converters``), ``show`` (datapoints in the terminal), ``view`` (a
local page to browse them), and ``index``, ``versions`` and ``vacuum`` (a dataset's
manifest, see ``ffrecord.dataset.grow``). ``ffrecord.cli`` registers them and maps their
errors to its exit statuses."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

EXIT_OK = 0


def add_converters(kinds: Any, epilog: str) -> None:
    """``ffrecord convert KIND SOURCE OUT`` for every kind of ``ffrecord.converters``."""
    from .converters import KINDS

    helps = {"imagefolder": "an image folder with one sub-folder per class",
             "mds": "a MosaicML Streaming (MDS) dataset directory",
             "litdata": "a LitData optimized dataset directory",
             "webdataset": "WebDataset .tar shards (a file or a directory)",
             "parquet": "Parquet files (a file or a directory)",
             "hf": "a Hugging Face dataset saved with save_to_disk",
             "arrayrecord": "ArrayRecord files (a file or a directory)",
             "granular": "a Granular dataset directory, plain or sharded"}
    for kind in KINDS:
        sub = kinds.add_parser(
            kind, help=helps[kind] + ", into a structured dataset", epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            description=f"Convert {helps[kind]} into a structured dataset at OUT. An interrupted "
                        "or failed conversion continues where it stopped when run again.")
        sub.set_defaults(run=_convert)
        sub.add_argument("source", metavar="SOURCE")
        sub.add_argument("out", metavar="OUT", help="the dataset directory to create")
        sub.add_argument("-j", "--workers", type=int, default=None, metavar="N",
                         help="processes converting in parallel (default: CPU count)")
        sub.add_argument("--compression", choices=("none", "lz4", "zstd"), default="none")
        sub.add_argument("--progress", "-v", "--verbose", dest="progress",
                         action=argparse.BooleanOptionalAction, default=None,
                         help="progress bar on stderr (default: when stderr is a terminal)")


def _convert(args: argparse.Namespace) -> int:
    from .converters import convert

    compression = None if args.compression == "none" else args.compression
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    try:
        count = convert(args.kind, args.source, args.out, workers=args.workers,
                        progress=progress, compression=compression)
    except (Exception, KeyboardInterrupt) as exc:
        from .converters._base import staging_directory

        staging = staging_directory(args.out)
        if staging.is_dir() and not isinstance(exc, FileExistsError):  # else not this run's to resume
            print(f"ffrecord convert: the units converted so far are kept in {staging}: run "
                  "the same command again to continue", file=sys.stderr)
        raise
    print(f"wrote {count:,} datapoints to {args.out}")
    return EXIT_OK


def add_show_and_view(command: Callable[[str, Callable, str], argparse.ArgumentParser]) -> None:
    show = command("show", _show, "Show datapoints of a structured dataset: text, numbers, arrays "
                                  "(dtype, shape, min, max), images (format and size); long values "
                                  "by their head and a count, a value that cannot be read or decoded "
                                  "by its error (then the exit status is 1).")
    show.add_argument("dataset", metavar="DATASET")
    show.add_argument("indices", nargs="*", metavar="INDEX",
                      help="datapoint index (negative counts from the end) or START:STOP "
                           "(default: 0)")
    show.add_argument("--field", metavar="F", help="only this field")
    show.add_argument("--out", metavar="FILE",
                      help="write the stored bytes of --field of one datapoint to FILE")

    view = command("view", _view, "Browse a structured dataset in a local web page (127.0.0.1, "
                                  "read-only): images, text, arrays, size histograms.")
    view.add_argument("dataset", metavar="DATASET", help="a dataset directory or s3:// prefix")
    view.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    view.add_argument("--open", action="store_true", help="open the page in a browser")


def _show(args: argparse.Namespace) -> int:
    from .cli import EXIT_CORRUPT, _parse_indices, _UsageError
    from .dataset import open_dataset
    from .dataset.display import as_text, display_decoders, spec_types, summarize_datapoints
    from .dataset.spec import parse_spec

    with open_dataset(args.dataset) as probe:
        spec = probe.spec
    with open_dataset(args.dataset, decoders=display_decoders(spec_types(spec))) as dataset:
        texts = args.indices or ["0"]
        indices = [i for text in texts for i in _parse_indices(text, len(dataset))]
        if args.field is not None and args.field not in spec:
            raise _UsageError(f"no field {args.field!r} (fields: {', '.join(spec)})")
        mask = None if args.field is None else [args.field]
        if args.out is not None:
            if args.field is None or len(indices) != 1:
                raise _UsageError("--out writes one field (--field) of one datapoint")
            if parse_spec(spec)[args.field].sequence:
                raise _UsageError(f"--out: {args.field!r} is a sequence field; its elements "
                                  "are separate values")
            field_reader = getattr(dataset, "field_reader", None)
            if field_reader is None or getattr(dataset, "shards", 1) != 1:
                raise _UsageError("--out needs a plain (not sharded) dataset")
            if dataset.fields[args.field].block is not None:  # a column: the value's stored bytes
                data = dataset.read_columns([indices[0]], [args.field])[args.field][0].tobytes()
            else:
                data = field_reader(args.field).read_one(indices[0])
            with open(args.out, "wb") as out:
                out.write(memoryview(data))
            print(f"wrote {len(memoryview(data).cast('B')):,} bytes of datapoint {indices[0]} "
                  f"field {args.field!r} to {args.out}")
            return EXIT_OK
        width = max(len(name) for name in spec)
        unreadable = 0
        for index, fields in zip(indices, summarize_datapoints(dataset, indices, mask, spec)):
            print(f"datapoint {index}")
            for name, summary in fields.items():
                unreadable += summary["kind"] == "error"
                text = as_text(summary).replace("\n", "\n" + " " * (width + 2))
                print(f"  {name:<{width}}  {text}")
    return EXIT_CORRUPT if unreadable else EXIT_OK


def _view(args: argparse.Namespace) -> int:
    from .viewer import serve

    serve(args.dataset, port=args.port, open_browser=args.open)
    return EXIT_OK


def add_version_commands(command: Callable[[str, Callable, str], argparse.ArgumentParser]) -> None:
    index = command("index", _index, "Write version 1 of the manifest of a dataset made before "
                                     "manifests (or by hand), so that it opens with one read: a "
                                     "dataset directory, a sharded one, or a directory of parts.")
    index.add_argument("dataset", metavar="DATASET", help="a dataset directory or s3:// prefix")
    versions = command("versions", _versions, "List the versions of a dataset: shards, datapoints "
                                              "and fields of each.")
    versions.add_argument("dataset", metavar="DATASET")
    vacuum = command("vacuum", _vacuum, "Delete a dataset's versions but the latest KEEP, and every "
                                        "file no kept version lists (what killed writers left).")
    vacuum.add_argument("dataset", metavar="DATASET")
    vacuum.add_argument("--keep", type=int, default=1, metavar="KEEP", help="versions kept (default: 1)")


def _index(args: argparse.Namespace) -> int:
    from .dataset import index

    print(f"{args.dataset}: version {index(args.dataset)} published")
    return EXIT_OK


def _versions(args: argparse.Namespace) -> int:
    from . import _remote
    from .dataset import manifest, versions

    root = _remote.as_path(args.dataset)
    for number in versions(args.dataset):
        m = manifest.load(root, number).manifest
        print(f"version {number}  {m.created}  {len(m.shards):,} shards  {m.length:,} datapoints  "
              f"fields: {', '.join(f'{n} ({t})' for n, t in m.spec.items())}")
    return EXIT_OK


def _vacuum(args: argparse.Namespace) -> int:
    from .dataset import vacuum

    done = vacuum(args.dataset, keep=args.keep)
    print(f"{args.dataset}: deleted versions {done['versions'] or 'none'}, {done['files']:,} "
          f"files, {done['bytes']:,} bytes")
    return EXIT_OK
