"""The model registry: names, wildcards, natural sort, errors, model_info, and the facts each
registration records (parameter count, input shape) against the built model."""

import keras
import numpy as np
import pytest

import zoo
from tests.conftest import variant_representatives
from zoo.architectures import catalog, registry
from zoo.errors import UnknownNameError
from zoo.training import ZooModel

SPINE_MODELS = {"mlp", "lenet5", "convnet_bn", "lstm_classifier", "gru_classifier"}


def test_every_family_is_represented():
    assert SPINE_MODELS <= set(zoo.list_models())
    assert {registry.get_spec(n).family for n in zoo.list_models()} >= {"mlp", "cnn", "rnn"}


def test_list_models_wildcards_family_and_natural_sort(monkeypatch):
    registry.list_registered()  # the built-in architectures are in before the registry is copied
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    for n in ("net110", "net20", "net56"):
        registry.register_model(family="cnn", paper="test", input_shape=(4,), params=0, name=n)(
            lambda input_shape, num_classes, name: None
        )
    assert zoo.list_models("net*") == ["net20", "net56", "net110"]  # natural, not lexical
    assert zoo.list_models(["net2*", "lenet?"]) == ["lenet5", "net20"]
    assert "mlp" not in zoo.list_models(family="cnn")
    assert zoo.list_models("nothing-matches*") == []


def test_unknown_name_suggests_close_names():
    with pytest.raises(UnknownNameError, match="lenet5") as err:
        zoo.build("lenet")
    assert err.value.suggestions[0] == "lenet5"
    with pytest.raises(KeyError, match="Unknown model 'nope'"):  # still a KeyError for callers
        zoo.build("nope")
    assert zoo.UnknownNameError("model", "conv_bn", zoo.list_models()).suggestions[0] == "convnet_bn"


def test_duplicate_registration_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        registry.register_model(family="mlp", paper="x", input_shape=(4,), params=0, name="mlp")(
            lambda input_shape, num_classes, name: None
        )


@pytest.mark.parametrize("params", [None, -1, 1.5, True])
def test_a_registration_records_its_parameter_count(params):
    with pytest.raises(ValueError, match=f"params={params!r}"):
        registry.register_model(family="mlp", paper="x", input_shape=(4,), params=params, name="nope")


def test_unknown_override_names_the_allowed_ones():
    with pytest.raises(TypeError, match="width"):
        zoo.build("mlp", widht=3)


@pytest.mark.parametrize("name", sorted(SPINE_MODELS))
def test_build_defaults_and_overrides(name):
    info = zoo.model_info(name)
    model = zoo.build(name, num_classes=7)
    assert isinstance(model, ZooModel) and model.name == name
    assert tuple(model.input_shape[1:]) == info.input_shape
    assert model.output_shape == (None, 7)
    assert info.params > 0  # equal to the built model's: test_declared_facts_equal_the_built_model
    assert info.paper and info.family in registry.FAMILIES
    x = np.random.default_rng(0).random((3, *info.input_shape), dtype=np.float32)
    probs = model.predict(x, verbose=0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)  # softmax head
    # Every layer has a readable name (no Keras auto names like "dense_3").
    assert not [layer.name for layer in model.layers if layer.name.split("_")[-1].isdigit()]


def test_lenet5_parameter_count_matches_the_paper():
    # LeCun et al. 1998 with a fully connected C3: 156 + 2,416 + 48,120 + 10,164 + 850.
    assert zoo.model_info("lenet5").params == 61_706


def test_rnn_accepts_a_variable_time_axis():
    model = zoo.build("lstm_classifier", input_shape=(None, 5), num_classes=3, units=8, num_layers=2, bidirectional=True)
    for t in (4, 9):
        assert model.predict(np.zeros((2, t, 5), np.float32), verbose=0).shape == (2, 3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(name="mlp", depth=0), "depth"),
        (dict(name="mlp", norm="group"), "norm"),
        (dict(name="convnet_bn", input_shape=(28, 28)), "rank 3"),
        (dict(name="convnet_bn", pooling="max"), "pooling"),
        (dict(name="lstm_classifier", input_shape=(28, 28, 1)), "rank 2"),
        (dict(name="mlp", num_classes=0), "num_classes"),
    ],
)
def test_bad_builder_arguments_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        zoo.build(kwargs.pop("name"), **kwargs)


def test_outputs_stay_float32_under_mixed_precision():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = zoo.build("convnet_bn")
        assert model.get_layer("stage1_conv").compute_dtype == "float16"
        assert model.predict(np.zeros((2, 28, 28, 1), np.float32), verbose=0).dtype == np.float32
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_zoo_list_cites_papers_briefly():
    from zoo.cli import short_reference

    assert short_reference(zoo.model_info("lenet5").paper) == "LeCun et al. 1998"
    assert short_reference("Ioffe & Szegedy 2015, Batch Normalization (ICML)") == "Ioffe & Szegedy 2015"
    assert short_reference("Graves 2013, https://arxiv.org/abs/1308.0850") == "Graves 2013"
    assert short_reference("He et al. 2016, Deep Residual Learning") == "He et al. 2016"


def _fact_cases():
    """Every architecture. Slow: size variants beyond each family's first, and keras.applications twins,
    whose declared counts test_keras_twins.py compares with keras.applications' own (the bases by default)."""
    keep = set(variant_representatives(zoo.list_models()))
    for name in zoo.list_models():
        slow = name not in keep or registry.get_spec(name).keras_twin is not None
        yield pytest.param(name, marks=(pytest.mark.slow,) if slow else ())


@pytest.mark.parametrize("name", list(_fact_cases()))
def test_declared_facts_equal_the_built_model(name):
    """The parameter count and input shape `zoo list` shows come from the registration, not a build."""
    spec = registry.get_spec(name)
    with keras.StatelessScope():  # variables declared, not allocated: ConvNeXt-XLarge's 350M cost nothing
        model = zoo.build(name)
    assert model.count_params() == spec.params, f"{name}: register_model(params={model.count_params():_})"
    assert tuple(model.input_shape[1:]) == spec.input_shape
    assert model.output_shape[-1] == spec.num_classes


def test_the_catalog_records_the_registry():
    """`zoo/architectures/catalog.json` (what `zoo list` reads) is what the registrations declare."""
    assert catalog.read() is not None and catalog.PATH.read_text() == catalog.render(), (
        "zoo/architectures/catalog.json is out of date: run python scripts/update_docs.py")
    assert catalog.list_models("resnet*") == zoo.list_models("resnet*")
    assert catalog.model_info("resnet50") == zoo.model_info("resnet50")
    with pytest.raises(UnknownNameError, match="resnet50"):
        catalog.model_info("resnet5")


def test_a_stale_catalog_is_not_read(tmp_path):
    stale = catalog.PATH.read_text().replace('"fingerprint": "', '"fingerprint": "0')
    (tmp_path / "catalog.json").write_text(stale)
    assert catalog.read(tmp_path / "catalog.json") is None
    assert catalog.read(tmp_path / "missing.json") is None
