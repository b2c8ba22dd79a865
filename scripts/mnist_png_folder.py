"""Writes prepared MNIST as a folder of PNG files, the layout `zoo train --data` reads.

    python scripts/mnist_png_folder.py /tmp/mnist_png            # train/<digit>/*.png, test/<digit>/*.png
    zoo train --data /tmp/mnist_png                              # the acceptance run of issue 14

The pixels are TFDS MNIST's uint8 values (prepare it first: `zoo data prepare mnist`), saved
losslessly; class folders are the digit names 0-9. Writing happens into a temporary folder
renamed into place at the end, so an interrupted run leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys


def write_pngs(out: str, data_dir: str | None = None, limit: int | None = None) -> dict:
    """Writes the train and test splits under `out`; returns split -> number of files."""
    import numpy as np
    import tensorflow_datasets as tfds
    from PIL import Image

    import zoo.data

    if os.path.exists(out):
        raise SystemExit(f"{out} exists; remove it or choose another folder.")
    tmp = f"{out}.partial-{os.getpid()}"
    counts = {}
    try:
        for split in ("train", "test"):
            builder = tfds.builder("mnist", data_dir=data_dir or zoo.data.default_data_dir())
            ds = builder.as_dataset(split=split, as_supervised=True)
            n = 0
            for image, label in tfds.as_numpy(ds):
                if limit and n >= limit:
                    break
                folder = os.path.join(tmp, split, str(int(label)))
                os.makedirs(folder, exist_ok=True)
                Image.fromarray(np.squeeze(image, -1)).save(os.path.join(folder, f"{n:05d}.png"))
                n += 1
            counts[split] = n
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return counts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="folder to create")
    parser.add_argument("--data-dir", help="prepared TFDS data (default $ZOO_DATA_DIR or ~/tensorflow_datasets)")
    parser.add_argument("--limit", type=int, help="at most this many images per split (for quick tries)")
    args = parser.parse_args(argv)
    counts = write_pngs(args.out, args.data_dir, args.limit)
    print(", ".join(f"{split}: {n} PNG files" for split, n in counts.items()), f"in {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
