"""PyTorch integration: datasets that read a batch per call, a DataLoader that resumes exactly.

``import ffrecord`` never imports torch; ``import ffrecord.torch`` does.

>>> from ffrecord.torch import DataLoader
>>> loader = DataLoader(list(range(6)), batch_size=2, shuffle=True, seed=0)
>>> batches = [b.tolist() for b in loader]
>>> sorted(sum(batches, []))
[0, 1, 2, 3, 4, 5]
"""

from .._extras import require

require("torch", "torch", "ffrecord.torch")
from .dataloader import DataLoader, mixture_start  # noqa: E402 (after the check that names the extra)
from .dataset import ConcatDataset, Dataset, ReaderRegistry, Subset
from .structured import StructuredDataset, batch_seeds

__all__ = ["ConcatDataset", "DataLoader", "Dataset", "ReaderRegistry", "StructuredDataset", "Subset", "batch_seeds",
           "mixture_start"]
