"""Train a PyTorch Lightning model on an ffrecord dataset, stop mid-epoch, resume exactly.

    python examples/lightning_datamodule.py DATA_DIR --max-steps 11 --checkpoint-dir CKPTS
    python examples/lightning_datamodule.py DATA_DIR --resume CKPTS/step=11.ckpt

The data module hands Lightning an ``ffrecord.torch.DataLoader``. Lightning stores the
loader's ``state_dict()`` in its checkpoints and calls ``load_state_dict`` on resume, so the
resumed run sees exactly the batches the uninterrupted run would have seen next, with any
number of workers. ``--log-batches FILE`` writes the sample indices of every training batch
(one JSON list a line), which is how a resume can be checked.

The dataset is written on first use: sample ``i`` is six float32 values, ``i`` itself, four
features and a target.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

import lightning as L
import numpy as np
import torch

from ffrecord import FileWriter
from ffrecord.torch import DataLoader, Dataset

FIELDS = 6  # index, four features, target


class Regression(Dataset):
    """Decodes a whole batch from the buffer it was read into: no per-sample work."""

    def process_batch(self, indices: Sequence[int], buffer: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        return buffer.view(np.float32).reshape(len(indices), FIELDS)


def write_dataset(path: Path, n: int, seed: int = 0) -> None:
    """``n`` samples of a noisy linear relation, each stored as six float32 values."""
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n, 4), dtype=np.float32)
    target = features @ np.array([1.0, -2.0, 0.5, 3.0], np.float32) + 0.1 * rng.standard_normal(n, dtype=np.float32)
    rows = np.column_stack([np.arange(n, dtype=np.float32), features, target]).astype(np.float32)
    with FileWriter(path, n) as writer:
        for row in rows:
            writer.write_one(row.tobytes())


class FFRecordDataModule(L.LightningDataModule):
    """The training data of one ``.ffr`` file (written by ``prepare_data`` when missing)."""

    def __init__(self, data_dir: str, samples: int = 64, batch_size: int = 8,
                 num_workers: int = 0, seed: int = 0, workers: str = "processes") -> None:
        super().__init__()
        self.path = Path(data_dir) / "train.ffr"
        self.samples, self.batch_size, self.num_workers, self.seed = samples, batch_size, num_workers, seed
        self.workers = workers

    def prepare_data(self) -> None:
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_dataset(self.path, self.samples)

    def train_dataloader(self) -> DataLoader:
        # A seeded shuffle: epoch e's order is a function of (seed, e), in every process.
        return DataLoader(Regression(self.path), batch_size=self.batch_size, shuffle=True,
                          seed=self.seed, num_workers=self.num_workers, workers=self.workers)


class LinearModel(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        prediction = self.linear(batch[:, 1:5]).squeeze(1)
        return torch.nn.functional.mse_loss(prediction, batch[:, 5])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


class LogBatches(L.Callback):
    """Appends the sample indices of each training batch to a file, one JSON list a line."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_train_batch_start(self, trainer: L.Trainer, module: L.LightningModule, batch: Any, batch_idx: int) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(batch[:, 0].long().tolist()) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=-1, help="stop after this many steps")
    parser.add_argument("--checkpoint-dir", help="save a checkpoint every --max-steps steps here")
    parser.add_argument("--resume", help="a checkpoint to resume from")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--threads", action="store_true", help="the workers are threads of this process")
    parser.add_argument("--log-batches", help="append each batch's sample indices to this file")
    args = parser.parse_args(argv)

    callbacks: list[L.Callback] = []
    if args.checkpoint_dir:
        callbacks.append(L.pytorch.callbacks.ModelCheckpoint(
            dirpath=args.checkpoint_dir, filename="{step}", every_n_train_steps=max(args.max_steps, 1),
            save_top_k=-1))
    if args.log_batches:
        callbacks.append(LogBatches(args.log_batches))
    L.seed_everything(0, verbose=False)
    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_epochs=args.epochs, max_steps=args.max_steps,
        callbacks=callbacks, logger=False, enable_checkpointing=bool(args.checkpoint_dir),
        enable_progress_bar=False, enable_model_summary=False,
    )
    data = FFRecordDataModule(args.data_dir, num_workers=args.workers,
                              workers="threads" if args.threads else "processes")
    trainer.fit(LinearModel(), datamodule=data, ckpt_path=args.resume)


if __name__ == "__main__":
    main()
