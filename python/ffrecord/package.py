"""The reference's ``ffrecord.package`` module: a folder packed into one FFRecord file.

Same objects as ``ffrecord.PackedFolder`` and ``ffrecord.pack_folder`` (see
``ffrecord.packed``), under the module name scripts written for the reference import.
"""

from .packed import PackedFolder, pack_folder, unpack_folder

__all__ = ["PackedFolder", "pack_folder", "unpack_folder"]
