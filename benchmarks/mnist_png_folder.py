"""Writes prepared MNIST as a folder of PNG files, the layout `zoo train --data` reads.

    python -m benchmarks.mnist_png_folder /tmp/mnist_png            # train/<digit>/*.png, test/<digit>/*.png
    zoo train --data /tmp/mnist_png                              # the acceptance run of issue 14
    python -m benchmarks.mnist_png_folder /tmp/colour --rgb 32 --names --limit 4000   # RGB images (issue 28)

The pixels are TFDS MNIST's uint8 values (prepare it first: `zoo data prepare mnist`), saved
losslessly; class folders are the digits 0-9 (`--names`: zero, one, ..., nine). `--rgb SIZE` writes RGB
images instead: each digit resized to SIZE x SIZE, drawn in a random colour on a random background
colour of a different brightness (seeded), a small colour classification task with no download. Writing happens into a temporary folder
renamed into place at the end, so an interrupted run leaves nothing half-written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys


NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def colourize(gray, size: int, rng):
    """A (28, 28) uint8 digit as a (size, size, 3) uint8 RGB image: the stroke in one random colour over a
    background of another, brightness apart so the digit stays legible."""
    import numpy as np
    from PIL import Image

    alpha = np.asarray(Image.fromarray(gray).resize((size, size), Image.BILINEAR), np.float32)[..., None] / 255
    ink, paper = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    if abs(ink.mean() - paper.mean()) < 80:  # too close: push the paper away from the ink
        paper = np.clip(paper + (100 if ink.mean() < 128 else -100), 0, 255)
    return np.round(alpha * ink + (1 - alpha) * paper).astype(np.uint8)


def write_pngs(out: str, data_dir: str | None = None, limit: int | None = None, rgb: int | None = None,
               names: bool = False) -> dict:
    """Writes the train and test splits under `out`; returns split -> number of files."""
    import numpy as np
    import tensorflow_datasets as tfds
    from PIL import Image

    import zoo.data

    if os.path.exists(out):
        raise SystemExit(f"{out} exists; remove it or choose another folder.")
    tmp = f"{out}.partial-{os.getpid()}"
    counts = {}
    rng = np.random.default_rng(0)
    try:
        for split in ("train", "test"):
            builder = tfds.builder("mnist", data_dir=data_dir or zoo.data.default_data_dir())
            ds = builder.as_dataset(split=split, as_supervised=True)
            n = 0
            for image, label in tfds.as_numpy(ds):
                if limit and n >= limit:
                    break
                folder = os.path.join(tmp, split, NAMES[int(label)] if names else str(int(label)))
                os.makedirs(folder, exist_ok=True)
                pixels = np.squeeze(image, -1)
                Image.fromarray(colourize(pixels, rgb, rng) if rgb else pixels).save(
                    os.path.join(folder, f"{n:05d}.png"))
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
    parser.add_argument("--rgb", type=int, metavar="SIZE", help="RGB images SIZE x SIZE: coloured digits on "
                        "coloured backgrounds")
    parser.add_argument("--names", action="store_true", help="class folders named zero, one, ... (default 0-9)")
    args = parser.parse_args(argv)
    counts = write_pngs(args.out, args.data_dir, args.limit, args.rgb, args.names)
    print(", ".join(f"{split}: {n} PNG files" for split, n in counts.items()), f"in {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
