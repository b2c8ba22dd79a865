"""The bottom layer of zoo: declarations every other package builds on.

- `options.py`: `Option`, one declaration of a user-facing setting (export options, training knobs);
- `model.py`: `ZooModel`, the model base every architecture builds and training compiles;
- `trainers/`: how `ZooModel`'s step is differentiated and run on each Keras backend (TensorFlow,
  JAX, PyTorch); only the running backend's module is imported;
- `train_step.py`: the `TrainFeature` interface `ZooModel.train_step` runs, and its helpers;
- `loss_scaling.py`: the dynamic loss scaling `ZooModel` adds for `mixed_float16`;
- `presets.py`: the local store of named pretrained weights (keras-hub's preset folders), no TensorFlow.

Nothing here imports from the rest of zoo except `zoo.errors` and `zoo.fileio`. `options` imports no
TensorFlow; the model base imports Keras (and TensorFlow only on the TensorFlow backend), so this
package imports none of its modules by itself.
"""
