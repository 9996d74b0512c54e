"""Figures of the reference implementation (HFAiLab ffrecord, C++/libaio/pybind11).

It is not installable here (not on PyPI), so it cannot run beside the contenders: these are
its figures measured separately on this machine type, with its own build, and labelled as
such wherever they are used.
"""

from __future__ import annotations

SOURCE = "reference, measured separately"

#: samples/s, random batches, warm cache, from Python.
WARM_1K_B256 = {True: 469e3, False: 515e3}  # by check_data
#: the pure-Python pread loop, measured in the same session as the reference.
PREAD_1K_B256 = {True: 226e3, False: 454e3}
#: GB/s, 128 KiB samples, batch 64, warm.
WARM_128K_B64_GBPS = {True: 1.40, False: 2.16}
#: samples/s, 4 KiB samples, cold cache, by batch size.
COLD_4K = {64: 23e3, 512: 18e3}
#: GB/s of the writer, by sample size.
WRITE_GBPS = {1024: 0.28, 128 * 1024: 0.56}


def as_json() -> dict:
    """The constants, for the results file."""
    return {
        "source": SOURCE,
        "warm_1k_b256_samples_per_s": {"check_on": WARM_1K_B256[True], "check_off": WARM_1K_B256[False]},
        "pread_loop_1k_b256_samples_per_s": {"check_on": PREAD_1K_B256[True], "check_off": PREAD_1K_B256[False]},
        "warm_128k_b64_gb_per_s": {"check_on": WARM_128K_B64_GBPS[True], "check_off": WARM_128K_B64_GBPS[False]},
        "cold_4k_samples_per_s": {f"batch_{b}": v for b, v in COLD_4K.items()},
        "write_gb_per_s": {f"{s}B": v for s, v in WRITE_GBPS.items()},
    }
