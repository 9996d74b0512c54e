"""One module per workload; each exposes ``run(ctx: BenchContext) -> None``."""
