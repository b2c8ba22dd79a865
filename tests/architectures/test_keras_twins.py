"""zoo's keras.applications twins against keras.applications itself (issue 15).

For every registered twin: the parameter count equals keras.applications'
(built without allocating weights). For one model per family: a
keras.applications model with random weights is saved as its ImageNet
downloads are laid out, zoo's twin loads that file by layer name, and both
compute the same function, with and without the top.
"""

import keras
import numpy as np
import pytest

import zoo
from tests.conftest import slow_run
from tests.architectures.keras_files import (
    keras_reloads_identically,
    randomize_weights,
    write_keras_applications_h5,
)
from zoo.architectures import registry

TWINS = [n for n in zoo.list_models() if registry.get_spec(n).keras_twin]


def keras_application(name):
    return getattr(keras.applications, registry.get_spec(name).keras_twin.application)


def test_the_issue_families_have_twins():
    applications = {registry.get_spec(n).keras_twin.application for n in TWINS}
    assert {"ResNet50", "MobileNetV2", "EfficientNetB0", "EfficientNetB7", "MobileNetV3Small", "MobileNetV3Large",
            "ConvNeXtTiny", "ConvNeXtLarge", "DenseNet121", "VGG16", "EfficientNetV2B0", "EfficientNetV2S"} <= applications


# The headless build is the same builder with the head left off: the default run checks it for one family, the
# slow run for every one (suite time, issue 39).
NOTOP_DEFAULT = "resnet50"


# One model per family, at the smallest input that reaches every stage.
FAMILY_CASES = {
    "resnet50": 64,
    "mobilenet_v2": 64,
    "efficientnet_b0": 64,
    "efficientnet_v2_b0": 64,
    "mobilenet_v3_small": 64,
    "convnext_tiny": 32,
    "densenet121": 64,
    "vgg16": 32,
}


def count_cases():
    """Every twin with its top; base models also without. Variants only rescale their base's
    builder, and building the 800-layer graphs of EfficientNet-B7 takes a while: marked slow. So are the bases
    whose every weight the file test below loads by name at a smaller input (`FAMILY_CASES`: equal shapes for
    every weight, so equal counts), except VGG16, whose top's first Dense grows with the input (suite time,
    issue 39); `zoo list`'s recorded count is still checked by default for one of them."""
    for name in TWINS:
        base = registry.get_spec(name).variant_of is None
        loaded_below = name in FAMILY_CASES and name not in ("vgg16", NOTOP_DEFAULT)
        marks = () if base and not loaded_below else (pytest.mark.slow,)
        yield pytest.param(name, True, marks=marks, id=f"{name}-top")
        if base:
            yield pytest.param(name, False, marks=() if name == NOTOP_DEFAULT else (pytest.mark.slow,),
                               id=f"{name}-notop")


@pytest.mark.parametrize("name, include_top", list(count_cases()))
def test_parameter_count_equals_keras_applications(name, include_top):
    # Variables declared in a StatelessScope are not allocated: ConvNeXt-XLarge's 350M cost nothing.
    shape = None if include_top else (224, 224, 3)
    with keras.StatelessScope():
        expected = keras_application(name)(weights=None, include_top=include_top, input_shape=shape).count_params()
        model = zoo.build(name, include_top=include_top)
    assert model.count_params() == expected
    if include_top:  # what `zoo list` shows, recorded at the registration
        assert zoo.model_info(name).params == expected


def family_cases():
    for name in sorted(FAMILY_CASES):
        yield pytest.param(name, True, id=f"{name}-top")
        yield pytest.param(name, False, marks=() if name == NOTOP_DEFAULT else (pytest.mark.slow,), id=f"{name}-notop")


@pytest.mark.parametrize("name, include_top", list(family_cases()))
def test_loads_the_keras_applications_h5_and_computes_the_same(name, include_top, tmp_path, request):
    keras.backend.clear_session()  # keras' automatic layer names as in a fresh session (`normalization`)
    shape = (FAMILY_CASES[name],) * 2 + (3,)
    kwargs = dict(weights=None, input_shape=shape, include_top=include_top)
    if include_top:
        kwargs.update(classes=7, classifier_activation=None)

    def make_reference():
        return keras_application(name)(**kwargs)

    reference = randomize_weights(make_reference())
    path = write_keras_applications_h5(reference, tmp_path / f"{name}.h5")
    x = np.random.default_rng(1).uniform(0, 255, (2, *shape)).astype("float32")
    # The file's layout, confirmed by Keras's own loader (one more build): the writer is one function for every
    # family, so the default run confirms it for one; `-m slow` for each (suite time, issue 39).
    if include_top and (name == NOTOP_DEFAULT or slow_run(request.config)):
        assert keras_reloads_identically(make_reference, reference, path, x)

    head = dict(num_classes=7, classifier_activation=None) if include_top else {}
    model = zoo.build(name, input_shape=shape, include_top=include_top, weights=path, **head)
    expected = reference(x, training=False).numpy()
    actual = model(x, training=False).numpy()
    assert actual.shape == expected.shape
    assert np.abs(actual - expected).max() <= 1e-5 * max(1.0, np.abs(expected).max())
    assert not model.load_report.skipped and not model.load_report.unused


def test_efficientnet_undoes_the_imagenet_variance_quirk(tmp_path):
    # keras.applications' EfficientNet files hold the RGB std devs as the Normalization variance
    # (tensorflow/tensorflow#49930); the model must still compute (x / 255 - mean) / std.
    keras.backend.clear_session()
    shape = (32, 32, 3)
    reference = keras.applications.EfficientNetB0(weights=None, input_shape=shape, include_top=False)
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    normalization = reference.get_layer("normalization")
    normalization.set_weights([mean, std, np.array(0)])
    normalization.finalize_state()
    path = write_keras_applications_h5(reference, tmp_path / "efficientnetb0_notop.h5")

    model = zoo.build("efficientnet_b0", input_shape=shape, include_top=False, weights=path)
    x = np.random.default_rng(0).uniform(0, 255, (1, *shape)).astype("float32")
    stem = keras.Model(model.input, model.get_layer("stem_normalization").output)
    np.testing.assert_allclose(stem(x).numpy(), (x / 255 - mean) / std, rtol=1e-5, atol=1e-5)
    assert any("49930" in note for note in model.load_report.notes)


def test_mobilenet_v3_bn_momentum_is_keras_by_default_and_settable():
    # keras.applications' 0.999 by default (the twin); a short run sets 0.99 on every BatchNorm.
    def momenta(model):
        return {layer.momentum for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)}

    reference = keras.applications.MobileNetV3Small(weights=None, input_shape=(32, 32, 3), classes=10)
    assert momenta(zoo.build("mobilenet_v3_small", input_shape=(32, 32, 3), num_classes=10)) == momenta(reference)
    short = zoo.build("mobilenet_v3_small", input_shape=(32, 32, 3), num_classes=10, bn_momentum=0.99)
    assert momenta(short) == {0.99}
    with pytest.raises(ValueError, match="bn_momentum"):
        zoo.build("mobilenet_v3_small", input_shape=(32, 32, 3), num_classes=10, bn_momentum=1.0)
