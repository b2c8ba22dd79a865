"""train_step features: each against an independent reference, composed, and on 2 replicas.

Backend-neutral: the references come from the backend's own autodiff (`tests.backends.autodiff`),
and `tests/test_backends.py` runs this file again on JAX and PyTorch. The 2-replica tests need
`tf.distribute` and run on TensorFlow only.
"""

import keras
import numpy as np
import pytest
from keras import ops

import zoo
from tests.backends.autodiff import backend, global_norm, loss_and_grads, numpy
from zoo.training import TrainConfig, features as F
from zoo.training.features import checkpointing

N = 64
tensorflow_only = pytest.mark.skipif(backend() != "tensorflow", reason="tf.distribute replicas: TensorFlow only")
# JAX users train jitted (Keras's default there); TensorFlow's graph and PyTorch's eager step need no XLA.
JIT = backend() == "jax"


def _data(seed=0, n=N, shape=(28, 28, 1)):
    rng = np.random.default_rng(seed)
    return rng.random((n, *shape), dtype=np.float32), rng.integers(0, 10, n).astype("int32")


def _init(name="mlp", **overrides):
    keras.utils.set_random_seed(0)
    return zoo.build(name, **overrides).get_weights()


MLP = dict(width=16, depth=1, dropout=0.0)


def _model(feats=(), weights=None, strategy=None, lr=0.1, name="mlp", overrides=MLP, optimizer=None, jit=JIT):
    import contextlib

    with strategy.scope() if strategy else contextlib.nullcontext():
        model = zoo.build(name, **overrides)
        if weights is not None:
            model.set_weights(weights)
        model.compile(optimizer or keras.optimizers.SGD(lr), "sparse_categorical_crossentropy", metrics=["accuracy"],
                      jit_compile=jit, features=list(feats))
    return model


def _max_diff(a, b):
    return max(float(np.abs(p - q).max()) for p, q in zip(a, b))


def _weights(variables):
    return [numpy(v) for v in variables]


def test_accumulation_equals_one_large_batch():
    x, y = _data()
    init = _init(**MLP)
    accumulated = _model([F.GradientAccumulation(4)], init)
    accumulated.fit(x, y, batch_size=16, shuffle=False, epochs=1, verbose=0)
    big = _model([], init)
    big.fit(x, y, batch_size=64, shuffle=False, epochs=1, verbose=0)
    assert int(numpy(accumulated.optimizer.iterations)) == 1  # one update for 4 micro-batches
    assert _max_diff(accumulated.get_weights(), big.get_weights()) < 1e-5


def test_accumulation_below_one_is_rejected():
    with pytest.raises(ValueError, match="steps >= 1"):
        F.GradientAccumulation(0)
    with pytest.raises(ValueError, match="accumulation_steps expects a positive integer"):
        TrainConfig(accumulation_steps=0).validate()


def test_clipping_matches_a_hand_clipped_step():
    x, y = _data()
    model = _model([F.ClipByGlobalNorm(0.05)], _init(**MLP))
    before = _weights(model.trainable_variables)
    _, grads = loss_and_grads(model, x, y)
    norm = global_norm(grads)
    assert norm > 0.05  # the clip is active
    model.train_on_batch(x, y)
    for w0, g, w1 in zip(before, grads, _weights(model.trainable_variables)):
        np.testing.assert_allclose(w1, w0 - 0.1 * g * 0.05 / norm, atol=1e-6)


def test_sam_step_matches_hand_computed_reference():
    x, y = _data()
    rho, lr = 0.05, 0.1
    model = _model([F.SAM(rho)], _init(**MLP), lr=lr)
    reference = _model([], model.get_weights())
    w0 = _weights(reference.trainable_variables)
    _, g = loss_and_grads(reference, x, y)
    norm = global_norm(g)
    for v, gi in zip(reference.trainable_variables, g):
        v.assign(numpy(v) + rho * gi / norm)
    _, g_sharp = loss_and_grads(reference, x, y)
    model.train_on_batch(x, y)
    for w, gi, w1 in zip(w0, g_sharp, _weights(model.trainable_variables)):
        np.testing.assert_allclose(w1, w - lr * gi, atol=1e-6)


def test_distillation_loss_is_alpha_ce_plus_t2_kl():
    x, y = _data()
    keras.utils.set_random_seed(1)
    teacher = zoo.build("mlp", width=8, depth=1, dropout=0.0)
    alpha, temperature = 0.3, 2.0
    model = _model([F.Distillation(teacher, alpha, temperature)], _init(**MLP), lr=1e-9)
    p_s, p_t = numpy(model(x, training=True)).astype(np.float64), numpy(teacher(x)).astype(np.float64)
    ce = -np.log(p_s[np.arange(N), y]).mean()

    def tempered(p):
        z = np.log(p) / temperature
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    q_t, q_s = tempered(p_t), tempered(p_s)
    kl = (q_t * (np.log(q_t) - np.log(q_s))).sum(axis=1).mean()
    logs = model.train_on_batch(x, y, return_dict=True)
    assert logs["loss"] == pytest.approx(alpha * ce + (1 - alpha) * temperature**2 * kl, rel=1e-5)


def test_teacher_with_a_different_output_shape_is_rejected():
    teacher = zoo.build("mlp", width=8, depth=1, num_classes=5)
    with pytest.raises(ValueError, match=r"teacher's output shape \(None, 5\) does not match the student's \(None, 10\)"):
        _model([F.Distillation(teacher)])


def test_mixed_float16_skips_overflowing_steps_and_keeps_float32_master_weights():
    x, y = _data()
    with F.policy_scope("mixed_float16"):
        model = zoo.build("mlp", **MLP)
    assert keras.config.dtype_policy().name == "float32"  # restored
    model.compile(keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy", jit_compile=False,
                  features=[F.LossScaling(initial_scale=2.0**40)])  # float16 gradients overflow at this scale
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert any(layer.compute_dtype == "float16" for layer in model.layers)
    before = model.get_weights()
    model.train_on_batch(x, y)
    scaler = next(f for f in model.train_features if isinstance(f, F.LossScaling))
    assert _max_diff(before, model.get_weights()) == 0  # no update on the overflowing step
    assert int(numpy(model.optimizer.iterations)) == 0 and float(numpy(scaler.scale)) == 2.0**39  # halved
    for _ in range(30):  # the scale falls until the gradients fit in float16, then updates resume
        model.train_on_batch(x, y)
    assert int(numpy(model.optimizer.iterations)) > 0 and _max_diff(before, model.get_weights()) > 0
    assert np.isfinite(np.concatenate([w.ravel() for w in model.get_weights()])).all()


def test_mixed_bfloat16_trains_with_float32_master_weights():
    x, y = _data()
    with F.policy_scope("mixed_bfloat16"):
        model = zoo.build("mlp", **MLP)
    model.compile(keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy", jit_compile=False)
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert any(layer.compute_dtype == "bfloat16" for layer in model.layers)
    losses = [model.train_on_batch(x, y) for _ in range(20)]
    assert losses[-1] < losses[0]


def test_mixup_and_cutmix_mix_neighbours_with_the_reported_ratio():
    images = np.arange(4 * 8 * 8, dtype=np.float32).reshape(4, 8, 8, 1)
    x, y = ops.convert_to_tensor(images), ops.convert_to_tensor(np.array([0, 1, 2, 3], "int32"))
    model = None  # the mixing does not look at the model
    mix = F.Mixup(0.4, seed=3)
    out = mix.transform_batch(model, F.Batch(x, y), ops.convert_to_tensor(5))
    other, lam = out.mix
    lam = float(numpy(lam))
    assert 0 < lam < 1 and numpy(other).tolist() == [1, 0, 3, 2]
    np.testing.assert_allclose(numpy(out.x), lam * images + (1 - lam) * images[[1, 0, 3, 2]], rtol=1e-6)
    again = mix.transform_batch(model, F.Batch(x, y), ops.convert_to_tensor(5))
    assert float(numpy(again.mix[1])) == lam  # stateless: the same step mixes the same way (resume, replicas)
    other_step = mix.transform_batch(model, F.Batch(x, y), ops.convert_to_tensor(6))
    assert float(numpy(other_step.mix[1])) != lam  # ... and another step another way

    cut = F.CutMix(1.0, seed=3).transform_batch(model, F.Batch(x, y), ops.convert_to_tensor(7))
    from_neighbour = numpy(cut.x) == images[[1, 0, 3, 2]]
    kept = (numpy(cut.x) == images).mean()
    assert from_neighbour.any() and kept == pytest.approx(float(numpy(cut.mix[1])))


def test_ema_tracks_the_weights_and_is_swapped_in_for_evaluation():
    x, y = _data()
    decay = 0.5
    model = _model([F.EMA(decay)], _init(**MLP))
    ema = model.train_features[0]
    expected = _weights(model.trainable_variables)
    for i in range(3):
        model.train_on_batch(x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16])
        expected = [decay * e + (1 - decay) * w for e, w in zip(expected, _weights(model.trainable_variables))]
    assert _max_diff(_weights(ema.averages), expected) < 1e-6
    training = _weights(model.trainable_variables)
    callback = ema.callbacks()[0]
    callback.set_model(model)
    callback.on_test_begin()
    assert _max_diff(_weights(model.trainable_variables), expected) < 1e-6
    callback.on_test_end()
    assert _max_diff(_weights(model.trainable_variables), training) == 0


def test_gradient_checkpointing_gives_the_plain_gradients():
    resnet = zoo.build("resnet20", input_shape=(16, 16, 3))
    assert len(checkpointing.cut_points(resnet)) >= 9  # a cut after every residual block
    assert len(checkpointing.segment_models(resnet)) > 2
    keras.utils.set_random_seed(0)
    # Batch norm inside the recomputed segments, in training mode (JAX rematerializes them as pure functions).
    model = zoo.build("convnet_bn", input_shape=(16, 16, 3), dropout=0.0)
    x = np.random.default_rng(1).random((4, 16, 16, 3), dtype=np.float32)
    y = np.array([0, 1, 2, 3], "int32")
    feature = F.GradientCheckpointing()
    feature.build(model)
    assert len(feature._segments) > 2
    forward = feature.wrap_forward(model, lambda t, training: model(t, training=training))
    _, plain = loss_and_grads(model, x, y)
    _, recomputed = loss_and_grads(model, x, y, forward=forward)
    assert _max_diff(plain, recomputed) < 1e-5


FEATURE_SETS = {
    "accumulation": lambda t: [F.GradientAccumulation(2)],
    "clipping": lambda t: [F.ClipByGlobalNorm(0.05)],
    "sam": lambda t: [F.SAM(0.05)],
    "distillation": lambda t: [F.Distillation(t, 0.5, 2.0)],
    "mixup_cutmix": lambda t: [F.BatchMixing(0.4, 1.0, seed=1)],
    "ema": lambda t: [F.EMA(0.9)],
    "checkpointing": lambda t: [F.GradientCheckpointing()],
    "composed": lambda t: [F.GradientAccumulation(2), F.ClipByGlobalNorm(0.05), F.LossScaling(256.0), F.EMA(0.9)],
}


# How far two replicas' weights may stray from one device's after the four steps, where 1e-5 is too tight:
# mixup/CutMix differed by 8.8e-5 once in a full suite run (1e-5 or less alone, with the losses equal to 1e-5
# either way); mixing each replica's half apart instead of the global batch would change the loss itself.
MIRRORED_WEIGHTS_BOUND = {"mixup_cutmix": 5e-4}
# "composed" holds accumulation, clipping, loss scaling and EMA together; alone, they run with -m slow.
COMPOSED_ALONE = {"accumulation", "clipping", "ema"}


@tensorflow_only
@pytest.mark.parametrize("feature_set", [pytest.param(n, marks=pytest.mark.slow) if n in COMPOSED_ALONE else n
                                         for n in sorted(FEATURE_SETS)])
def test_two_replica_mirrored_equals_one_device(feature_set):
    import zoo.data
    from zoo.training import distribute

    mirrored = distribute.strategy("mirrored")
    assert mirrored.num_replicas_in_sync == 2
    x, y = _data(2, n=64, shape=(16, 16, 1))
    init = _init("lenet5", input_shape=(16, 16, 1))
    keras.utils.set_random_seed(3)
    teacher = zoo.build("mlp", input_shape=(16, 16, 1), width=8, depth=1, dropout=0.0)
    results = []
    for strategy in (None, mirrored):
        model = _model(FEATURE_SETS[feature_set](teacher), init, strategy, name="lenet5", overrides=dict(input_shape=(16, 16, 1)))
        history = model.fit(zoo.data.from_arrays(x, y, batch_size=16), epochs=1, verbose=0).history
        extra = [numpy(a) for f in model.train_features for a in getattr(f, "averages", [])]
        results.append((history["loss"], model.get_weights() + extra))
    (loss1, w1), (loss2, w2) = results
    np.testing.assert_allclose(loss2, loss1, rtol=1e-5)
    assert _max_diff(w1, w2) < MIRRORED_WEIGHTS_BOUND.get(feature_set, 1e-5)


def test_features_are_switchable_from_a_config():
    config = TrainConfig(accumulation_steps=2, clip_norm=1.0, sam_rho=0.05, mixup_alpha=0.2, ema_decay=0.99,
                         gradient_checkpointing=True)
    names = [type(f).__name__ for f in F.from_config(config)]
    assert names == ["GradientAccumulation", "ClipByGlobalNorm", "SAM", "BatchMixing", "EMA", "GradientCheckpointing"]
    assert F.from_config(TrainConfig()) == []


@pytest.mark.skipif(backend() != "tensorflow", reason="the command line checks flags before any backend runs")
@pytest.mark.parametrize(
    "args, message",
    [
        (["--accumulation-steps", "0"], "accumulation_steps expects a positive integer"),
        (["--mixed-precision", "mixed_float61"], "Did you mean: mixed_float16"),
        (["--teacher", "missing.keras"], "teacher must be a saved .keras model file"),
    ],
)
def test_bad_feature_flags_get_a_clear_error(tmp_path, args, message):
    import os
    import subprocess
    import sys

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    r = subprocess.run([sys.executable, "-m", "zoo.cli", "train", *args], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr
    assert os.listdir(tmp_path) == []
