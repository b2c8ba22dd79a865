"""The table default against its variants (the measurements behind its design), on the tables suite's splits.

    python -m benchmarks.tables_variants star98,diabetes default,tabm8,no_embedding,standard_scaling 0,1,2

Each variant is what `zoo train --data CSV --target target` runs with one change (a flag, a `--set`, or
the previous default recipe); one JSON line per table, seed and variant: test accuracy or RMSE, `fit`
seconds, epochs run and the epoch kept. `benchmarks/results/tables_variants.jsonl` holds the lines measured
for issue 29 (other processes shared the 2 cores: compare scores, not times).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import tables

# The recipe `zoo train --data` used for tables before issue 29 (zoo/recipes/own_data/table.toml then).
PREVIOUS_DEFAULT = """description = "the table default before issue 29"
model = "tabular_resnet"
epochs = 300
batch_size = 32
optimizer = "adamw"
lr = 1e-3
weight_decay = 1e-2
schedule = "cosine"
warmup_fraction = 0.05
early_stopping = 30

[model_overrides]
depth = 1
width = 32
hidden_dropout = 0.2
"""
VARIANTS = {
    "default": {},
    "tabm8": {"model_overrides": {"members": 8}},
    "single_mlp": {"model_overrides": {"members": 1}},
    "no_embedding": {"model_overrides": {"embedding": None}},
    "standard_scaling": {"scaling": "standard"},
    "previous_default": {"recipe": "previous"},
}


def run(table_names: list[str], variants: list[str], seeds: list[int]):
    from zoo.training import train
    from zoo.training.planner import config_for_data

    with tempfile.TemporaryDirectory(prefix="zoo-variants-") as tmp:
        previous = Path(tmp) / "previous_default.toml"
        previous.write_text(PREVIOUS_DEFAULT)
        for table in tables._selected(",".join(table_names)):
            frame = table.load()
            frame["target"] = (np.unique(frame["target"].to_numpy(), return_inverse=True)[1]
                               if table.task == "classification" else frame["target"].astype(np.float64))
            csv = Path(tmp) / f"{table.name}.csv"
            frame.to_csv(csv, index=False)
            for seed in seeds:
                for name in variants:
                    changes = dict(VARIANTS[name])
                    recipe = str(previous) if changes.pop("recipe", None) else None
                    config, data = config_for_data(csv, recipe=recipe, target_column="target", task=table.task,
                                                   seed=seed, out=str(Path(tmp) / f"{name}-{seed}"), export_dir=None,
                                                   verbose=0, log=lambda line: None, **changes)
                    result = train(config, data=data)
                    test = data.splits.dataset("test", shuffle=False, batch_size=4096)
                    y = np.concatenate([b for _, b in test.as_numpy_iterator()])
                    p = np.asarray(result.model.predict(test, verbose=0))
                    score = tables._score(table.task, y, p.argmax(-1) if table.task == "classification" else p.ravel())
                    yield {"table": table.name, "seed": seed, "variant": name, "score": round(score, 4),
                           "train_s": round(result.train_time_s, 1), "epochs": result.epochs_run,
                           "kept": result.kept_epoch}


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print(__doc__)
        return 2
    names, variants, seeds = argv[0].split(","), argv[1].split(","), [int(s) for s in argv[2].split(",")]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        from zoo.errors import UnknownNameError

        raise UnknownNameError("variant", unknown[0], list(VARIANTS))
    for line in run(names, variants, seeds):
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
