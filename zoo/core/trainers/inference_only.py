"""The steps of a backend Keras runs inference on only (numpy, openvino): compiling for training is refused."""

from __future__ import annotations

import keras


class Steps:
    def _zoo_check_trainable(self):
        from zoo.core.trainers import unsupported_backend_error

        raise unsupported_backend_error(keras.backend.backend())

    def _zoo_retrace_key(self, data):
        return None
