"""A training script written like the original FFRecord examples: no ``__main__`` guard.

Run as ``python no_main_guard.py DATA``; prints the sorted indices of two epochs as JSON.
The default worker start method must cope (spawn or forkserver would re-run this file).
"""

import json
import pickle
import sys

from ffrecord.torch import DataLoader, Dataset


class Samples(Dataset):
    def process(self, indices, data):
        return [pickle.loads(b) for b in data]


loader = DataLoader(Samples(sys.argv[1]), batch_size=4, shuffle=True, num_workers=2)
seen = []
for epoch in range(2):
    for index, value in loader:
        seen += index.tolist()
print(json.dumps(sorted(seen)))
