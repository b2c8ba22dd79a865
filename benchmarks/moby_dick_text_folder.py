"""A labelled text folder from Moby-Dick, offline (issue 40's acceptance data): each paragraph of 8 words or more
a `.txt` file, labelled by its chapter group (4 classes: chapters 1-30, 31-65, 66-100, 101-135).

    zoo data prepare moby_dick
    python -m benchmarks.moby_dick_text_folder /tmp/moby_text      # 2266 paragraphs
"""

from __future__ import annotations

import os
import re
import sys

GROUPS = ((1, 30, "ch001_030"), (31, 65, "ch031_065"), (66, 100, "ch066_100"), (101, 135, "ch101_135"))


def main(argv=None) -> int:
    from zoo.data import moby_dick
    from zoo.data.loading import default_data_dir

    out = (argv or sys.argv[1:])[0]
    with open(os.path.join(moby_dick.text_dir(default_data_dir()), moby_dick.FILENAME), encoding="utf-8") as f:
        text = f.read()
    parts = re.split(r"\nCHAPTER (\d+)\.[^\n]*\n", text)
    n = 0
    for i in range(1, len(parts) - 1, 2):
        chapter, body = int(parts[i]), parts[i + 1]
        name = next(g for a, b, g in GROUPS if a <= chapter <= b)
        os.makedirs(os.path.join(out, name), exist_ok=True)
        for j, paragraph in enumerate(p for p in re.split(r"\n\s*\n", body) if len(p.split()) >= 8):
            with open(os.path.join(out, name, f"c{chapter:03d}_{j:03d}.txt"), "w", encoding="utf-8") as f:
                f.write(" ".join(paragraph.split("\n")))
            n += 1
    print(f"{n} paragraphs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
