"""TF Serving's MultiInference API (`tensorflow_serving/apis/inference.proto`): several classify and regress
tasks of one model on the same examples, as `tensorflow_serving/servables/tensorflow/multi_inference.cc`
(`TensorFlowMultiInferenceRunner::Infer`) runs them: every task names the same model, no signature twice,
each a classify or regress task whose signature passes `PreProcessClassification` or
`PreProcessRegression` (`zoo.deploy.serve.classify`); then one result per task, in the tasks' order.

TF Serving runs the signatures in one session call, fed the same examples; this server runs each signature
on them in turn, with the same results.
"""

from __future__ import annotations

from tensorflow_serving.apis import inference_pb2

from zoo.deploy.serve import classify
from zoo.deploy.serve.errors import ServingError, invalid
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE


def model_name(request) -> str:
    """The model all tasks name; INVALID_ARGUMENT as multi_inference.cc for an empty or a second name."""
    name = ""
    for task in request.tasks:
        if not task.model_spec.name:
            raise invalid("Found ModelSpec with an empty model name.")
        if name and task.model_spec.name != name:
            raise invalid("All ModelSpecs in a MultiInferenceRequest must access the same model name.")
        name = task.model_spec.name
    if not name:  # no task: the servable lookup's answer for an empty spec (ServerCore)
        raise invalid("Found ModelSpec with an empty model name.")
    return name


def multi_inference(store, servable, request) -> inference_pb2.MultiInferenceResponse:
    """The tasks of `request` on `servable` (the version the first task's model spec selects)."""
    plans, seen = [], set()
    for task in request.tasks:
        key = task.model_spec.signature_name or SERVING_SIGNATURE
        if key in seen:
            raise invalid(f"Duplicate evaluation of signature: {key}")
        seen.add(key)
        if key not in servable.signature_defs:
            raise invalid(f"Requested signature not found in model graph: {key}")
        signature = servable.signature_defs[key]
        if task.method_name == classify.CLASSIFY_METHOD:
            names = classify.check_classification(servable, key, signature)
        elif task.method_name == classify.REGRESS_METHOD:
            names = classify.check_regression(servable, key, signature)
        else:
            raise ServingError("UNIMPLEMENTED", f"Unsupported signature method_name: {task.method_name}")
        plans.append((task, key, names))
    serialized = classify.serialized_examples(request.input)
    response = inference_pb2.MultiInferenceResponse()
    for task, key, names in plans:
        outputs = classify.run_examples(store, servable, key, serialized)
        result = response.results.add()
        result.model_spec.name = task.model_spec.name
        result.model_spec.signature_name = key
        result.model_spec.version.value = servable.version
        if task.method_name == classify.CLASSIFY_METHOD:
            classify.fill_classification({k: outputs[k] for k in names}, len(serialized),
                                         result.classification_result)
        else:
            classify.fill_regression(outputs, len(serialized), result.regression_result)
    return response
