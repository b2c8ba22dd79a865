"""Training knobs: one declaration per `TrainConfig` field drives the check, the flag, the recipe key,
the docs and the train_step feature it switches on."""

import dataclasses
from pathlib import Path

import pytest

from zoo.core.options import POSITIVE_INT, OptionError, add_arguments
from zoo.errors import UnknownNameError
from zoo.training import knobs as K
from zoo.training.config import TrainConfig, load_recipe

ROOT = Path(__file__).resolve().parents[2]


def _config_from_flags(*flags):
    from zoo.cli import build_parser
    from zoo.cli.train import train_config_from_args

    return train_config_from_args(build_parser().parse_args(["train", *flags]))


def test_flags_parse_to_the_values_a_recipe_would_hold():
    config = _config_from_flags(
        "--recipe", "mnist_cnn", "--epochs", "2", "--val-split", "none", "--jit-compile", "off", "--mixup", "0.2",
        "--seed", "none", "--augment", "flip,translate:0.1", "--no-deterministic", "--gradient-checkpointing",
        "--lr", "1e-3",
    )
    assert (config.epochs, config.val_split, config.jit_compile, config.mixup_alpha) == (2, None, False, 0.2)
    assert (config.seed, config.augment, config.deterministic, config.gradient_checkpointing) == (
        None, ("flip", "translate:0.1"), False, True)
    assert config.lr == 1e-3
    # Keys no flag was given for keep the recipe's values.
    assert (config.recipe, config.batch_size, config.target, config.model_overrides["dropout"]) == (
        "mnist_cnn", 128, 0.993, 0.3)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--epochs", "0"], "epochs expects a positive integer"),
        (["--optimizer", "adamx"], "Did you mean: adam, adamw"),
        (["--ema-decay", "1.5"], "ema_decay expects a number in (0, 1)"),
        (["--jit-compile", "maybe"], "expected auto, on (true) or off (false)"),
    ],
)
def test_bad_flags_fail_in_the_parser(flags, message, capsys):
    with pytest.raises(SystemExit) as e:
        _config_from_flags(*flags)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_recipe_keys_and_values_are_checked_naming_the_file(tmp_path):
    recipe = tmp_path / "mine.toml"
    recipe.write_text('model = "mlp"\nepoch = 3\n')
    with pytest.raises(UnknownNameError, match=r"recipe key \(in mine.toml\) 'epoch'. Did you mean: epochs"):
        load_recipe(str(recipe))
    recipe.write_text('model = "mlp"\nepochs = 0\n')
    with pytest.raises(OptionError, match="recipe mine.toml option epochs expects a positive integer"):
        load_recipe(str(recipe))
    recipe.write_text('model = "mlp"\naugment = ["flip"]\nval_split = "none"\n')
    config = load_recipe(str(recipe))
    assert (config.augment, config.val_split, config.recipe) == (("flip",), None, "mine")


def test_every_feature_knob_names_a_feature_built_from_the_config():
    from zoo.training.features import TrainFeature, from_config

    feature_knobs = [k for k in K.knobs(TrainConfig) if k.feature]
    assert {k.name for k in feature_knobs} >= {"accumulation_steps", "clip_norm", "sam_rho", "teacher", "ema_decay"}
    for k in feature_knobs:
        cls = K.load_feature(k.feature)
        assert issubclass(cls, TrainFeature) and cls.from_config.__func__ is not TrainFeature.from_config.__func__
    on = {"accumulation_steps": 3, "clip_norm": 2.0, "sam_rho": 0.1, "cutmix_alpha": 1.0, "ema_decay": 0.9,
          "gradient_checkpointing": True}
    built = {type(f).__name__: f for f in from_config(TrainConfig(**on))}
    assert (built["GradientAccumulation"].steps, built["ClipByGlobalNorm"].clip_norm, built["SAM"].rho) == (3, 2.0, 0.1)
    assert (built["BatchMixing"].mixup_alpha, built["BatchMixing"].cutmix_alpha, built["EMA"].decay) == (0, 1.0, 0.9)


def test_a_new_knob_is_one_declaration():
    """A field declared with `knob()` is checked, gets a flag and switches on its feature, with no other edit."""
    import argparse

    Extended = dataclasses.make_dataclass(
        "Extended", [("freeze_epochs", int, K.knob(0, "epochs with the backbone frozen", check=POSITIVE_INT,
                                                   feature="zoo.training.features.ema:EMA")),
                     ("note", str, K.knob("", "a note kept with the run", cli=False))],
        bases=(TrainConfig,))
    declared = K.knobs(Extended)[-2]
    assert declared.name == "freeze_epochs" and declared.cli_flag == "--freeze-epochs"
    with pytest.raises(OptionError, match="freeze_epochs expects a positive integer. Received: freeze_epochs=-2"):
        K.check_values(Extended(freeze_epochs=-2))
    parser = argparse.ArgumentParser()
    add_arguments(parser, K.knobs(Extended))
    assert parser.parse_args(["--freeze-epochs", "4"]).freeze_epochs == 4
    assert [c.__name__ for c in K.active_features(Extended(freeze_epochs=4))] == ["EMA"]
    assert K.active_features(Extended()) == []
    # Its docs rows (`zoo recipes --knobs`, the site's knobs page), written out by hand from the two lines above.
    rows = K.docs_page(Extended).splitlines()[-2:]
    assert rows == ["| `freeze_epochs` | `--freeze-epochs` | epochs with the backbone frozen; a positive integer; "
                    "default 0. Switches on `EMA`. |",
                    "| `note` | - | a note kept with the run. |"]
