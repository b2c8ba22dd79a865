"""A peer: the same CNN's training step in PyTorch (CPU, eager), when torch is installed.

`convnet_bn` (zoo/architectures/cnn.py) layer for layer: per stage a 3x3
conv without bias, batch norm (Keras' epsilon 1e-3; Keras momentum m is
PyTorch momentum 1 - m, https://pytorch.org/docs/stable/generated/torch.nn.BatchNorm2d.html),
ReLU, 2x2 max pooling between stages, then flatten, dropout and a linear
classifier; AdamW with the recipe's learning rate and weight decay, cross
entropy on the logits (the same loss as Keras' softmax + sparse cross
entropy). The same batch size and thread count as the zoo run; the batches
are the recipe pipeline's own. A short probe of both memory formats
(https://pytorch.org/tutorials/intermediate/memory_format_tutorial.html) picks
the faster, which is then measured and named in the result. Without torch the
result says why it was skipped.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from benchmarks.common import cpu_count


def torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__


def convnet_bn_torch(input_shape=(28, 28, 1), num_classes: int = 10, filters=(16, 32, 32), dropout: float = 0.2,
                     bn_momentum: float = 0.9):
    """`convnet_bn` in PyTorch (channels-first), with the same parameter count."""
    from torch import nn

    h, w, channels = input_shape
    layers = []
    for i, f in enumerate(filters):
        layers += [nn.Conv2d(channels, f, 3, padding=1, bias=False),
                   nn.BatchNorm2d(f, eps=1e-3, momentum=1 - bn_momentum), nn.ReLU()]
        channels = f
        if i < len(filters) - 1:
            layers.append(nn.MaxPool2d(2))
            h, w = h // 2, w // 2
    layers += [nn.Flatten(), nn.Dropout(dropout), nn.Linear(h * w * channels, num_classes)]
    return nn.Sequential(*layers)


def count_params(model) -> int:
    """Trainable parameters plus batch-norm moving statistics, as Keras' `count_params` counts them."""
    return sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for name, b in model.named_buffers() if not name.endswith("num_batches_tracked"))


def run(config, settings, zoo_samples_per_s: float | None = None) -> dict:
    """Training samples/s of the PyTorch convnet_bn; the ratio zoo/torch when zoo's rate is given.

    `config`: the fp32 `TrainConfig` the zoo run measured (its batches, batch size, optimizer, seed);
    `settings`: warmup_steps, steps and rounds, as the training suite's `Settings`.
    """
    version = torch_version()
    if version is None:
        return {"skipped": "torch is not installed (pip install torch==2.13.0 --index-url "
                           "https://download.pytorch.org/whl/cpu)"}
    import torch

    from zoo.training.builders import load_splits

    seed = config.seed or 0
    if config.model != "convnet_bn":
        return {"skipped": f"the peer is convnet_bn; recipe {config.recipe!r} trains {config.model!r}"}
    threads = cpu_count()
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    batches = [(torch.from_numpy(np.ascontiguousarray(x.numpy().transpose(0, 3, 1, 2))),
                torch.from_numpy(y.numpy().astype("int64")))
               for x, y in load_splits(config)[0].take(settings.steps + settings.warmup_steps)]
    # A short probe of each memory format, then the faster one measured `rounds` times.
    probe = {fmt: _samples_per_s(batches[: settings.warmup_steps + min(settings.steps, 15)], config, fmt,
                                 settings.warmup_steps)
             for fmt in ("contiguous", "channels_last")}
    best = max(probe, key=probe.get)
    rate = statistics.median(_samples_per_s(batches, config, best, settings.warmup_steps)
                             for _ in range(max(1, min(3, settings.rounds))))
    return {
        "torch": version,
        "threads": threads,
        "batch_size": config.batch_size,
        "memory_format": best,
        "samples_per_s": round(rate, 1),
        "probe_samples_per_s_by_format": {k: round(v, 1) for k, v in probe.items()},
        "params": count_params(convnet_bn_torch()),
        "zoo_samples_per_s": zoo_samples_per_s,
        "ratio": round(zoo_samples_per_s / rate, 3) if zoo_samples_per_s else None,
    }


def _samples_per_s(batches, config, memory_format: str, warmup_steps: int) -> float:
    import torch

    fmt = torch.channels_last if memory_format == "channels_last" else torch.contiguous_format
    model = convnet_bn_torch().to(memory_format=fmt)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = [(x.contiguous(memory_format=fmt), y) for x, y in batches]

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    for x, y in batches[:warmup_steps]:
        step(x, y)
    start = time.perf_counter()
    for x, y in batches[warmup_steps:]:
        step(x, y)
    loss = float(step(*batches[0]))  # blocks until done (eager CPU is synchronous anyway)
    elapsed = time.perf_counter() - start
    if not np.isfinite(loss):
        raise FloatingPointError(f"PyTorch convnet_bn diverged (loss {loss})")
    return (len(batches) - warmup_steps + 1) * config.batch_size / elapsed

