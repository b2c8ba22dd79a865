"""`Conversion`: one job being converted, and what the formats build from it on the way.

A `zoo.deploy.formats.jobs.Job` is plain data (the target, the model's facts, the data files by role).
A format's `convert(conversion)` reads the job through this object, and asks it for what it
converts from: the export's SavedModel, another SavedModel of the same model (TFLite's batch-1
graph, the unrolled RNN graph TFLite and TF.js share), or the Keras model itself (the RNN routes
and the int8 guards rebuild or inspect it). Each is built once, in the conversion process, and
written to the job's scratch space atomically, so the targets of one export share them.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from zoo.errors import ZooError
from zoo.fileio import atomic_dir
from zoo.deploy.formats.jobs import CALIBRATION, REFERENCE, TEST, Job


class Conversion:
    """The job, and the SavedModels and Keras model a format converts from (see the module docstring)."""

    def __init__(self, job: Job):
        self.job = job

    @property
    def target(self):
        return self.job.target

    @property
    def options(self):
        return self.job.target.options

    @property
    def model(self):
        """The model's facts (`zoo.deploy.formats.jobs.ModelFacts`): name, signature, layers, recurrent, ..."""
        return self.job.model

    @property
    def work_dir(self) -> str:
        return self.job.work_dir

    # ------------------------------------------------------------------ data, by role

    def inputs(self, role: str = TEST) -> dict[str, np.ndarray] | None:
        """Named inputs of a role (test, calibration, validation, warmup): `{input name: array}`, or None."""
        from zoo.deploy.formats import inputs

        path = self.job.data.get(role)
        return None if path is None else inputs.load(path)

    def array(self, name: str) -> np.ndarray | None:
        """An array the export saved: labels of a role (`test_labels`, `validation_labels`) or a reference."""
        path = self.job.data.get(name)
        return None if path is None else np.load(path, mmap_mode="r")

    def labels(self, role: str = TEST) -> np.ndarray | None:
        return self.array(f"{role}_labels")

    def references(self) -> dict[str, np.ndarray]:
        """Keras's outputs on the test inputs, by output name."""
        return {name: np.asarray(self.array(REFERENCE.format(i))) for i, name in enumerate(self.model.output_names)}

    @functools.cached_property
    def front(self):
        """The model's front-end (`zoo.deploy.formats.text_front.TextFront`) where this format carries it as data
        (every format but the SavedModel, which holds string ops): the format converts the numeric model after
        it; else None."""
        from zoo.deploy.formats import text_front

        if self.target.format == "saved_model":
            return None
        return text_front.of_metadata(self.model.metadata)

    def numeric_inputs(self, role: str = TEST) -> dict[str, np.ndarray] | None:
        """`inputs(role)` as the converted graph takes them: raw strings through the carried front-end (`front`)
        into token ids, by the numeric model's input name; other inputs as they are."""
        from zoo.deploy.formats.text_front import IDS_INPUT

        x = self.inputs(role)
        if x is None or self.front is None:
            return x
        return {IDS_INPUT: self.front.encode(x[self.front.input])}

    def single_input(self, role: str) -> np.ndarray | None:
        """The array of a role for code that takes single-input models only (the int8 guards, OpenVINO's
        accuracy control)."""
        x = self.numeric_inputs(role)
        if x is None:
            return None
        if len(x) != 1:
            raise ZooError(f"this step takes single-input models; this one has {len(x)} inputs: {sorted(x)}.")
        return next(iter(x.values()))

    def example(self) -> dict[str, np.ndarray]:
        """The first test example, a batch of one, by input name."""
        return {k: v[:1] for k, v in self.inputs(TEST).items()}

    def calibration(self, limit: int | None = None) -> dict[str, np.ndarray]:
        """Calibration inputs by name, at most `limit` (default the target's `calibration_samples`); a
        quantization-aware model without any calibrates the tensors it left unquantized on the test inputs."""
        x = self.numeric_inputs(CALIBRATION)
        if x is None:
            x = self.numeric_inputs(TEST)
        n = limit or self.options.get("calibration_samples") or 200
        return {k: (np.asarray(v[:n], np.float32) if np.asarray(v).dtype.kind == "f" else np.asarray(v[:n]))
                for k, v in x.items()}

    # ------------------------------------------------------------------ what a format converts from

    def keras_model(self):
        """The model, loaded once per process from the export's `.keras` file (the RNN routes rebuild it).

        The export scanned the file it was given (`zoo.deploy.scan.require_safe`) or wrote this one itself; it
        loads under the same `Trust` (Keras's safe_mode unless the user turned it off).
        """
        if self.model.keras_file is None:
            raise ZooError(f"this route ({self.target.label}) rebuilds the Keras model from a .keras file, and the "
                           f"model could not be saved as one: {self.model.keras_file_error}")
        return _cached_model(self.model.keras_file, self.job.trust.unsafe_deserialization)

    def saved_model(self, variant: str = "", model=None, batch_size: int | None = None) -> str:
        """A SavedModel of the model: the export's own, else one written once to the scratch space.

        `variant` names a different graph (e.g. TFLite's fixed-batch or the unrolled RNN route), made
        from `model` (default: the job's) with `batch_size` (default: dynamic).
        """
        if self.front is not None:  # the numeric model after the front-end the format carries as data
            from zoo.deploy.formats import text_front

            model, variant = text_front.split(model or self.keras_model()), f"numeric_{variant or 'default'}"
        if not variant and self.job.saved_model_dir and os.path.isdir(self.job.saved_model_dir):
            return self.job.saved_model_dir
        path = os.path.join(self.work_dir, f"saved_model_{variant or 'default'}")
        if not os.path.isdir(path):  # written atomically, so a complete one from an earlier target
            from zoo.deploy.formats.saved_model import export_saved_model

            signature = self.model.signature if model is None else None  # a rebuilt model says its own inputs
            with atomic_dir(path) as tmp:
                os.rmdir(tmp)
                export_saved_model(model or self.keras_model(), tmp, batch_size=batch_size, signature=signature)
        return path

    def exported_program(self) -> str:
        """The torch route's ExportedProgram of the model (`zoo.deploy.formats.torch.export_program`, a `.pt2`),
        written once per export to the scratch space, so the formats on the route share one trace; this process
        runs Keras's PyTorch backend (`zoo.deploy.formats.routes`)."""
        import keras

        if keras.backend.backend() != "torch":
            raise ZooError(f"the torch route ({self.target.label}) converts on Keras's PyTorch backend; this "
                           f"process runs {keras.backend.backend()!r} (convert in the export's isolated process).")
        if self.front is not None:
            raise ZooError(f"the torch route ({self.target.label}) does not carry a text front-end "
                           "(TextVectorization) as data; export this model on the tensorflow route.")
        path = os.path.join(self.work_dir, "program_torch.pt2")
        if path not in _PROGRAMS:
            if os.path.isfile(path):  # written by an earlier process of this export
                import torch

                _PROGRAMS[path] = {"program": torch.export.load(path), "notes": []}
            else:
                from zoo.deploy.formats.torch import export_program

                _PROGRAMS[path] = export_program(self.keras_model(), self.model.signature, self.inputs(TEST), path)
        return path

    @property
    def program(self):
        """The loaded ExportedProgram of `exported_program()` (the torch route's converters start from it)."""
        return _PROGRAMS[self.exported_program()]["program"]

    @property
    def program_notes(self) -> list[str]:
        """What the torch route's trace fixed (a free axis other than the batch), for the report."""
        return list(_PROGRAMS[self.exported_program()]["notes"])

    def static_input_shape(self) -> tuple:
        """Per-example input shape of the unrolled RNN route: the data's, the time axis set by `sequence_length`.

        The export's `sequence_length` option applies to recurrent models only (their axis 0 is time).
        The route rebuilds the model with one static input, so it takes single-input models.
        """
        x = self.inputs(TEST)
        if len(x) != 1:
            raise ZooError(f"the unrolled RNN route fixes the shape of one input; this model has {len(x)}: "
                           f"{sorted(x)}.")
        shape = tuple(next(iter(x.values())).shape[1:])
        length = self.options.get("sequence_length")
        if length and shape and self.model.recurrent:
            shape = (length, *shape[1:])
        return shape

    def unrolled_saved_model(self, example_shape: tuple) -> str:
        """A SavedModel of the model rebuilt with `unroll=True` and this static input shape, weights copied.

        The unrolled RNN route of TFLite and TF.js: no while loop and no TensorLists, a plain
        feed-forward graph, at the price of a fixed sequence length. Written once per export and shape,
        so the formats share it.
        """
        from zoo.deploy.formats import model_io

        variant = "unrolled_" + "x".join(map(str, example_shape))
        return self.saved_model(variant, model=model_io.unrolled_copy(self.keras_model(), example_shape))


_PROGRAMS: dict[str, dict] = {}  # .pt2 path -> {"program", "notes"}: the torch route's trace, once per process


@functools.lru_cache(maxsize=2)
def _cached_model(path: str, unsafe_deserialization: bool):
    from zoo.deploy.formats import keras as keras_file

    return keras_file.load(path, unsafe_deserialization=unsafe_deserialization)
