"""`ZooModel`'s steps on PyTorch: autograd for the gradients, every update under `torch.no_grad()`.

Keras's `TorchTrainer` runs the step eagerly (or under `torch.compile` with `jit_compile=True`);
`torch.autograd.grad` returns the gradients without accumulating them into `.grad`, so a feature
that differentiates twice in one step (SAM) needs no zeroing in between.
"""

from __future__ import annotations

import torch


class Steps:
    """The PyTorch part of `ZooModel`."""

    def train_step(self, data):
        with torch.no_grad():  # autograd only where `_zoo_gradients` turns it on
            return self._train_program(data)

    def test_step(self, data):
        with torch.no_grad():
            return self._test_program(data)

    def _zoo_check_trainable(self):
        pass

    def _zoo_gradients(self, compute, variables):
        with torch.enable_grad():
            scaled, aux = compute()
            tensors = [v.value for v in variables]
            grads = torch.autograd.grad(scaled, tensors, allow_unused=True) if tensors else ()
        return aux, list(grads)

    def _zoo_all_reduce(self, grads):
        return grads  # one process, one device: the batch is the global batch

    def _zoo_unscale_loss(self, loss):
        return loss

    def _zoo_retrace_key(self, data):
        return None  # eager: nothing is traced

    def _zoo_apply_if(self, optimizer, ready, grads, variables):
        # Eager: the condition is a value, read once per step.
        if isinstance(ready, bool) or bool(ready):
            with torch.no_grad():
                optimizer.apply(grads, variables)
        return ready
