"""train_step features: each against an independent reference, composed, and on 2 replicas."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import zoo
import zoo.data
from zoo.training import distribute
from zoo.training import TrainConfig, features as F
from zoo.training.features import checkpointing

N = 64


def _data(seed=0, n=N, shape=(28, 28, 1)):
    rng = np.random.default_rng(seed)
    return rng.random((n, *shape), dtype=np.float32), rng.integers(0, 10, n).astype("int32")


def _init(name="mlp", **overrides):
    keras.utils.set_random_seed(0)
    return zoo.build(name, **overrides).get_weights()


MLP = dict(width=16, depth=1, dropout=0.0)


def _model(feats=(), weights=None, strategy=None, lr=0.1, name="mlp", overrides=MLP, optimizer=None):
    with (strategy or tf.distribute.get_strategy()).scope():
        model = zoo.build(name, **overrides)
        if weights is not None:
            model.set_weights(weights)
        model.compile(optimizer or keras.optimizers.SGD(lr), "sparse_categorical_crossentropy", metrics=["accuracy"],
                      jit_compile=False, features=list(feats))
    return model


def _grads(model, x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, model(x, training=True)))
    return loss, tape.gradient(loss, model.trainable_variables)


def _max_diff(a, b):
    return max(float(np.abs(p - q).max()) for p, q in zip(a, b))


def test_accumulation_equals_one_large_batch():
    x, y = _data()
    init = _init(**MLP)
    accumulated = _model([F.GradientAccumulation(4)], init)
    accumulated.fit(zoo.data.from_arrays(x, y, batch_size=16), epochs=1, verbose=0)
    big = _model([], init)
    big.fit(zoo.data.from_arrays(x, y, batch_size=64), epochs=1, verbose=0)
    assert int(accumulated.optimizer.iterations) == 1  # one update for 4 micro-batches
    assert _max_diff(accumulated.get_weights(), big.get_weights()) < 1e-5


def test_accumulation_below_one_is_rejected():
    with pytest.raises(ValueError, match="steps >= 1"):
        F.GradientAccumulation(0)
    with pytest.raises(ValueError, match="accumulation_steps expects a positive integer"):
        TrainConfig(accumulation_steps=0).validate()


def test_clipping_matches_a_hand_clipped_step():
    x, y = _data()
    model = _model([F.ClipByGlobalNorm(0.05)], _init(**MLP))
    before = [w.numpy() for w in model.trainable_variables]
    _, grads = _grads(model, x, y)
    norm = tf.linalg.global_norm(grads).numpy()
    assert norm > 0.05  # the clip is active
    model.train_on_batch(x, y)
    for w0, g, w1 in zip(before, grads, model.trainable_variables):
        np.testing.assert_allclose(w1.numpy(), w0 - 0.1 * g.numpy() * 0.05 / norm, atol=1e-6)


def test_sam_step_matches_hand_computed_reference():
    x, y = _data()
    rho, lr = 0.05, 0.1
    model = _model([F.SAM(rho)], _init(**MLP), lr=lr)
    reference = _model([], model.get_weights())
    w0 = [w.numpy() for w in reference.trainable_variables]
    _, g = _grads(reference, x, y)
    norm = tf.linalg.global_norm(g).numpy()
    for v, gi in zip(reference.trainable_variables, g):
        v.assign_add(rho * gi / norm)
    _, g_sharp = _grads(reference, x, y)
    model.train_on_batch(x, y)
    for w, gi, w1 in zip(w0, g_sharp, model.trainable_variables):
        np.testing.assert_allclose(w1.numpy(), w - lr * gi.numpy(), atol=1e-6)


def test_distillation_loss_is_alpha_ce_plus_t2_kl():
    x, y = _data()
    keras.utils.set_random_seed(1)
    teacher = zoo.build("mlp", width=8, depth=1, dropout=0.0)
    alpha, temperature = 0.3, 2.0
    model = _model([F.Distillation(teacher, alpha, temperature)], _init(**MLP), lr=1e-9)
    p_s, p_t = model(x, training=True).numpy().astype(np.float64), teacher(x).numpy().astype(np.float64)
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
    assert int(model.optimizer.iterations) == 0 and float(scaler.scale.numpy()) == 2.0**39  # halved
    for _ in range(30):  # the scale falls until the gradients fit in float16, then updates resume
        model.train_on_batch(x, y)
    assert int(model.optimizer.iterations) > 0 and _max_diff(before, model.get_weights()) > 0
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
    x = tf.constant(np.arange(4 * 8 * 8, dtype=np.float32).reshape(4, 8, 8, 1))
    y = tf.constant([0, 1, 2, 3])
    model = None  # the mixing does not look at the model
    mix = F.Mixup(0.4, seed=3)
    out = mix.transform_batch(model, F.Batch(x, y), tf.constant(5))
    other, lam = out.mix
    lam = float(lam)
    assert 0 < lam < 1 and other.numpy().tolist() == [1, 0, 3, 2]
    np.testing.assert_allclose(out.x.numpy(), lam * x.numpy() + (1 - lam) * x.numpy()[[1, 0, 3, 2]], rtol=1e-6)
    again = mix.transform_batch(model, F.Batch(x, y), tf.constant(5))
    assert float(again.mix[1]) == lam  # stateless: the same step mixes the same way (resume, replicas)

    cut = F.CutMix(1.0, seed=3).transform_batch(model, F.Batch(x, y), tf.constant(7))
    from_neighbour = cut.x.numpy() == x.numpy()[[1, 0, 3, 2]]
    kept = (cut.x.numpy() == x.numpy()).mean()
    assert from_neighbour.any() and kept == pytest.approx(float(cut.mix[1]))


def test_ema_tracks_the_weights_and_is_swapped_in_for_evaluation():
    x, y = _data()
    decay = 0.5
    model = _model([F.EMA(decay)], _init(**MLP))
    ema = model.train_features[0]
    expected = [w.numpy() for w in model.trainable_variables]
    for i in range(3):
        model.train_on_batch(x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16])
        expected = [decay * e + (1 - decay) * w.numpy() for e, w in zip(expected, model.trainable_variables)]
    assert _max_diff([a.numpy() for a in ema.averages], expected) < 1e-6
    training = [w.numpy() for w in model.trainable_variables]
    callback = ema.callbacks()[0]
    callback.set_model(model)
    callback.on_test_begin()
    assert _max_diff([w.numpy() for w in model.trainable_variables], expected) < 1e-6
    callback.on_test_end()
    assert _max_diff([w.numpy() for w in model.trainable_variables], training) == 0


def test_gradient_checkpointing_gives_the_plain_gradients():
    keras.utils.set_random_seed(0)
    model = zoo.build("resnet20", input_shape=(16, 16, 3))
    segments = checkpointing.segment_models(model)
    assert len(checkpointing.cut_points(model)) >= 9 and len(segments) > 2  # a cut after every residual block
    x = tf.random.stateless_uniform((4, 16, 16, 3), seed=(1, 2))
    y = tf.constant([0, 1, 2, 3])
    feature = F.GradientCheckpointing()
    feature.build(model)
    forward = feature.wrap_forward(model, lambda t, training: model(t, training=training))

    def grads(fn):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, fn(x, training=False)))
        return tape.gradient(loss, model.trainable_variables)

    plain = grads(lambda t, training: model(t, training=training))
    recomputed = grads(forward)
    assert _max_diff([g.numpy() for g in plain], [g.numpy() for g in recomputed]) < 1e-5


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


@pytest.mark.parametrize("feature_set", sorted(FEATURE_SETS))
def test_two_replica_mirrored_equals_one_device(feature_set):
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
        extra = [a.numpy() for f in model.train_features for a in getattr(f, "averages", [])]
        results.append((history["loss"], model.get_weights() + extra))
    (loss1, w1), (loss2, w2) = results
    np.testing.assert_allclose(loss2, loss1, rtol=1e-5)
    assert _max_diff(w1, w2) < 1e-5


def test_features_are_switchable_from_a_config():
    config = TrainConfig(accumulation_steps=2, clip_norm=1.0, sam_rho=0.05, mixup_alpha=0.2, ema_decay=0.99,
                         gradient_checkpointing=True)
    names = [type(f).__name__ for f in F.from_config(config)]
    assert names == ["GradientAccumulation", "ClipByGlobalNorm", "SAM", "BatchMixing", "EMA", "GradientCheckpointing"]
    assert F.from_config(TrainConfig()) == []


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
