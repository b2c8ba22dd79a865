"""Fuzzing `zoo serve`: malformed requests over REST and gRPC on loopback; none may get a server error.

Generated with Hypothesis (and, for REST, schemathesis from the server's own OpenAPI
description at `/v1/openapi.json`, positive and negative cases):

- REST: bodies (random JSON in `instances`/`inputs`/`signature_name`, tensors of every
  JSON type with NaN, Infinity, 1e308, huge integers, ragged and deep nesting, truncated
  and mutated JSON, raw bytes), paths (model names, versions, labels, verbs, percent-
  encoded junk), methods and content types.
- gRPC: PredictRequest, GetModelMetadataRequest and GetModelStatusRequest protos with random
  model specs, dtypes (also undefined ones), shapes (negative, huge), contents and output
  filters; serialized requests truncated or replaced by random bytes; unknown methods.

A REST response must be below 500 and, if an error, a JSON object `{"error": "..."}`; a
gRPC status must not be a server fault (INTERNAL, UNKNOWN, DATA_LOSS, UNAVAILABLE). A
connection the server drops counts as a failure. Before and after, a valid request must
get the same answer, bit for bit, over both APIs.

`python scripts/benchmark.py serving-fuzz` runs it against `zoo serve` in a subprocess and writes
`benchmarks/results/serving_fuzz.json`; `tests/test_serving_limits.py` runs a few hundred cases.
"""

from __future__ import annotations

import json
import math
import tempfile
import urllib.parse

import numpy as np

from benchmarks.common import machine, markdown_table
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE

GRPC_SERVER_FAULTS = ("INTERNAL", "UNKNOWN", "DATA_LOSS", "UNAVAILABLE")
MODELS = {"scale": ("x", "float32"), "count": ("n", "int32"), "text": ("text", "string")}
VALID_X = np.array([[1.5, -2.25], [0.0, 3.0]], np.float32)


def add_arguments(parser) -> None:
    parser.add_argument("--requests", type=int, default=2000, help="generated requests per API (2000)")
    parser.add_argument("--seed", type=int, default=0)


# ---- strategies ------------------------------------------------------------------------------------------

def weighted(*pairs):
    """One of the strategies, each with its weight (`st.one_of` weighs its branches alike, even repeated ones)."""
    from hypothesis import strategies as st

    table = [s for weight, s in pairs for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


def _strategies():
    from hypothesis import strategies as st

    special = st.sampled_from([1e308, -1e308, 3.5e38, 3.4028235e38, 1e-320, 16777217, 2**31, 2**63, -2**63 - 1,
                               2**70, math.nan, math.inf, -math.inf, 0.1, -0.0, 255, 256, -129])
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), special,
                       st.text(max_size=8), st.fixed_dictionaries({"b64": st.text(max_size=12)}))
    keys = st.one_of(st.sampled_from(["b64", "instances", "inputs", "signature_name", "x", "n", "text", "image"]),
                     st.text(max_size=6))
    values = st.recursive(leaves, lambda c: st.lists(c, max_size=4) | st.dictionaries(keys, c, max_size=3),
                          max_leaves=24)

    @st.composite
    def tensor(draw):
        rank = draw(st.integers(0, 4))
        shape = [draw(st.integers(0, 3)) for _ in range(rank)]
        leaf = draw(st.sampled_from([leaves, special, st.floats(-10, 10), st.integers(-5, 5)]))

        def build(dims):
            if not dims:
                return draw(leaf)
            return [build(dims[1:]) for _ in range(dims[0])]

        return build(shape)

    names = st.sampled_from(["x", "n", "text", "image", "y", "b64"])
    # Near-valid rows for the served models: the right shape, leaves of every JSON type.
    row = st.one_of(st.lists(st.one_of(special, leaves, st.floats(-10, 10)), min_size=1, max_size=3), leaves)
    plausible = st.one_of(
        st.fixed_dictionaries({"instances": st.lists(row, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"inputs": st.dictionaries(names, st.lists(row, max_size=3), min_size=1, max_size=2)}),
    )
    body_values = st.one_of(
        plausible,
        st.fixed_dictionaries({"instances": st.one_of(tensor(), values)}),
        st.fixed_dictionaries({"inputs": st.one_of(tensor(), values, st.dictionaries(names, tensor(), max_size=2))}),
        st.fixed_dictionaries({"signature_name": values, "instances": tensor()}),
        st.dictionaries(keys, values, max_size=4),
        values,
    )

    def encode(v):
        return json.dumps(v, allow_nan=True).encode()

    @st.composite
    def mutated(draw):
        raw = encode(draw(body_values))
        how = draw(st.sampled_from(["truncate", "insert", "replace"]))
        i = draw(st.integers(0, max(0, len(raw) - 1)))
        if how == "truncate":
            return raw[:i]
        junk = draw(st.binary(min_size=1, max_size=4) | st.sampled_from([b"[", b"]", b"{", b'"', b"\\", b"\x00"]))
        return raw[:i] + junk + raw[i + (how == "replace"):]

    @st.composite
    def deep(draw):
        n = draw(st.sampled_from([31, 32, 33, 64, 1000, 5000, 100_000]))
        opener, closer = draw(st.sampled_from([(b"[", b"]"), (b'{"a":', b"}")]))
        inner = opener * n + b"1" + closer * n
        return draw(st.sampled_from([inner, b'{"instances": ' + inner + b"}", b'{"inputs": ' + inner + b"}"]))

    bodies = st.one_of(body_values.map(encode), mutated(), deep(), st.binary(max_size=64),
                       st.sampled_from([b"", b"null", b"{}", b'{"instances": []}', b'{"instances": [[1e999999]]}',
                                        b'{"instances": [[NaN, Infinity]]}', b'{"instances": "\\ud800"}',
                                        b'\xef\xbb\xbf{"instances": [[1, 2]]}']))

    segment = st.text(min_size=0, max_size=8).map(lambda s: urllib.parse.quote(s, safe=""))
    model = weighted((4, st.sampled_from([*MODELS, "lenet5", "scale "])), (1, segment))
    version = st.one_of(st.sampled_from(["", "/versions/1"]), st.integers(0, 2**70).map(lambda v: f"/versions/{v}"),
                        segment.map(lambda s: f"/versions/{s}"), segment.map(lambda s: f"/labels/{s}"))
    verb = st.one_of(st.sampled_from([":predict", ":predict", ":predict", "/metadata", "", ":classify", ":regress",
                                      ":explain", "/", "//"]), segment.map(lambda s: ":" + s))
    api_path = st.builds(lambda m, v, b: f"/v1/models/{m}{v}{b}", model, version, verb)
    path = weighted((3, api_path), (1, st.one_of(
                     st.sampled_from(["/", "/v1", "/v1/models", "/v1/models/", "/v2/models/scale:predict",
                                      "/v1/openapi.json", "/v1/models/%2e%2e/%2e%2e/etc/passwd"]),
                     segment.map(lambda s: "/" + s))))
    method = st.sampled_from(["POST"] * 6 + ["GET"] * 2 + ["PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
    content_type = st.one_of(st.sampled_from(["application/json", "text/plain", "application/octet-stream",
                                              "multipart/form-data; boundary=x", "application/json; charset=latin-1"]),
                             st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=20))
    predict_paths = st.sampled_from([f"/v1/models/{m}:predict" for m in MODELS] +
                                    ["/v1/models/scale/versions/1:predict", "/v1/models/scale/labels/stable:predict"])
    focused = st.tuples(st.just("POST"), predict_paths, st.just("application/json"), bodies)
    rest = weighted((3, focused), (1, st.tuples(method, path, content_type, bodies)))
    return st, rest


def rest_cases():
    """Strategy of (method, path, content type, body) REST requests."""
    return _strategies()[1]


def grpc_cases():
    """Strategy of (method name, serialized request bytes) gRPC calls."""
    from hypothesis import strategies as st
    from tensorflow.core.framework import tensor_pb2, types_pb2
    from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, predict_pb2

    dtypes = st.one_of(st.sampled_from(list(types_pb2.DataType.values())), st.integers(0, 300))
    dims = st.lists(st.sampled_from([-2, -1, 0, 1, 2, 3, 2**20, 2**31, 2**40]), max_size=4)
    floats = st.lists(st.floats() | st.sampled_from([1e308, 3.5e38, math.nan, math.inf]), max_size=8)

    @st.composite
    def tensor(draw):
        t = tensor_pb2.TensorProto(dtype=draw(dtypes))
        for d in draw(dims):
            t.tensor_shape.dim.add(size=d)
        t.tensor_shape.unknown_rank = draw(st.booleans()) and draw(st.booleans())
        content = draw(st.sampled_from(["bytes", "float", "int", "string", "bool", "int64", "none", "double"]))
        if content == "bytes":
            t.tensor_content = draw(st.binary(max_size=64))
        elif content == "float":
            t.float_val.extend(draw(floats))
        elif content == "double":
            t.double_val.extend(draw(floats))
        elif content == "int":
            t.int_val.extend(draw(st.lists(st.integers(-2**31, 2**31 - 1), max_size=8)))
        elif content == "int64":
            t.int64_val.extend(draw(st.lists(st.integers(-2**63, 2**63 - 1), max_size=8)))
        elif content == "string":
            t.string_val.extend(draw(st.lists(st.binary(max_size=8), max_size=4)))
        elif content == "bool":
            t.bool_val.extend(draw(st.lists(st.booleans(), max_size=8)))
        return t

    @st.composite
    def spec(draw, message):
        message.model_spec.name = draw(weighted((6, st.sampled_from(list(MODELS))),
                                                (1, st.sampled_from(["lenet5", ""])), (1, st.text(max_size=8))))
        choice = draw(st.sampled_from(["none"] * 4 + ["version", "label"]))
        if choice == "version":
            message.model_spec.version.value = draw(st.integers(-2**63, 2**63 - 1))
        elif choice == "label":
            message.model_spec.version_label = draw(st.text(max_size=8))
        message.model_spec.signature_name = draw(st.sampled_from(["", "", SERVING_SIGNATURE, "serve"]) |
                                                 st.text(max_size=8))
        return message

    @st.composite
    def plausible_tensor(draw, dtype: str):
        """The model's own dtype and rank, random sizes and values (NaN, overflow, too few, too many)."""
        t = tensor_pb2.TensorProto(dtype={"float32": types_pb2.DT_FLOAT, "int32": types_pb2.DT_INT32,
                                          "string": types_pb2.DT_STRING}[dtype])
        batch = draw(st.sampled_from([0, 1, 2, 3, 2**20]))
        t.tensor_shape.dim.add(size=batch)
        if dtype == "float32":
            t.tensor_shape.dim.add(size=draw(st.sampled_from([2, 2, 3])))
            t.float_val.extend(draw(floats))
        elif dtype == "int32":
            t.int_val.extend(draw(st.lists(st.integers(-2**31, 2**31 - 1), max_size=4)))
        else:
            t.string_val.extend(draw(st.lists(st.binary(max_size=8), max_size=4)))
        return t

    @st.composite
    def predict(draw):
        request = draw(spec(predict_pb2.PredictRequest()))
        if request.model_spec.name in MODELS and draw(st.booleans()):
            name, dtype = MODELS[request.model_spec.name]
            request.inputs[name].CopyFrom(draw(plausible_tensor(dtype)))
        for name in draw(st.lists(st.sampled_from(["x", "n", "text", "image"]) | st.text(max_size=6), max_size=2)):
            request.inputs[name].CopyFrom(draw(tensor()))
        request.output_filter.extend(draw(st.lists(st.sampled_from(["y", "m", "length"]) | st.text(max_size=6),
                                                   max_size=2)))
        return "/tensorflow.serving.PredictionService/Predict", request.SerializeToString()

    @st.composite
    def metadata(draw):
        request = draw(spec(get_model_metadata_pb2.GetModelMetadataRequest()))
        request.metadata_field.extend(draw(st.lists(st.sampled_from(["signature_def"]) | st.text(max_size=6),
                                                    max_size=2)))
        return "/tensorflow.serving.PredictionService/GetModelMetadata", request.SerializeToString()

    @st.composite
    def status(draw):
        request = draw(spec(get_model_status_pb2.GetModelStatusRequest()))
        return "/tensorflow.serving.ModelService/GetModelStatus", request.SerializeToString()

    @st.composite
    def damaged(draw):
        method, raw = draw(st.one_of(predict(), metadata(), status()))
        how = draw(st.sampled_from(["truncate", "random", "flip"]))
        if how == "truncate":
            return method, raw[:draw(st.integers(0, max(0, len(raw) - 1)))]
        if how == "random":
            return method, draw(st.binary(max_size=64))
        i = draw(st.integers(0, max(0, len(raw) - 1)))
        return method, raw[:i] + bytes([draw(st.integers(0, 255))]) + raw[i + 1:]

    unknown = st.tuples(st.sampled_from(["/tensorflow.serving.PredictionService/Classify",
                                         "/tensorflow.serving.PredictionService/MultiInference",
                                         "/tensorflow.serving.ModelService/HandleReloadConfigRequest",
                                         "/zoo.Nothing/Here"]), st.binary(max_size=16))
    return weighted((6, predict()), (1, metadata()), (1, status()), (2, damaged()), (1, unknown))


# ---- driving ------------------------------------------------------------------------------------------------

def drive(strategy, n: int, seed: int, action) -> int:
    """Calls `action(example)` on at least `n` examples of `strategy` (Hypothesis, generate phase only)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fix_seed

    done = [0]
    round_ = 0
    while done[0] < n:
        @settings(max_examples=n - done[0], database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck), print_blob=False)
        @fix_seed(seed + round_)
        @given(strategy)
        def run(example):
            done[0] += 1
            action(example)

        before = done[0]
        run()
        round_ += 1
        if done[0] == before:
            break
    return done[0]


class Tally:
    """Outcomes by status, the failures (server errors, dropped connections, non-JSON errors) and examples."""

    def __init__(self):
        self.requests = 0
        self.by_status: dict[str, int] = {}
        self.failures: list[str] = []

    def add(self, status: str, failure: str | None = None) -> None:
        self.requests += 1
        self.by_status[status] = self.by_status.get(status, 0) + 1
        if failure:
            self.failures.append(failure)

    def as_dict(self) -> dict:
        return {"requests": self.requests, "by_status": dict(sorted(self.by_status.items())),
                "failures": len(self.failures), "first_failures": self.failures[:10]}


def check_rest(tally: Tally, method: str, path: str, response, what: str = "") -> None:
    status = response.status_code
    failure = None
    if status >= 500:
        failure = f"{method} {path}{what}: HTTP {status} {response.text[:200]}"
    elif status >= 400 and method != "HEAD":
        try:
            body = json.loads(response.content)
            if not (isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]):
                raise ValueError
        except ValueError:
            failure = f"{method} {path}{what}: HTTP {status} without a JSON error body: {response.content[:120]!r}"
    tally.add(str(status), failure)


def fuzz_rest(base_url: str, n: int, seed: int = 0) -> dict:
    """`n` Hypothesis-generated requests and `n // 4` schemathesis cases against the REST API."""
    import httpx

    tally = Tally()
    with httpx.Client(base_url=base_url, timeout=60) as http:

        def send(case):
            method, path, content_type, body = case
            try:
                r = http.request(method, path, content=body if method not in ("GET", "HEAD") else None,
                                 headers={"content-type": content_type})
            except httpx.TransportError as e:
                tally.add("dropped", f"{method} {path}: {type(e).__name__}: {e}")
                return
            check_rest(tally, method, path, r)

        drive(rest_cases(), n, seed, send)
    schema_tally = fuzz_openapi(base_url, max(1, n // 4), seed)
    return {"generated": tally.as_dict(), "schemathesis": schema_tally}


def fuzz_openapi(base_url: str, n: int, seed: int = 0) -> dict:
    """Positive and negative cases schemathesis derives from the server's `/v1/openapi.json`."""
    import httpx
    import requests
    import schemathesis
    from hypothesis import strategies as st

    spec = httpx.get(f"{base_url}/v1/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(spec)
    strategy = st.one_of(schema.as_strategy(generation_mode=schemathesis.GenerationMode.POSITIVE),
                         schema.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE),
                         schema.as_strategy(generation_mode=schemathesis.GenerationMode.NEGATIVE,
                                            path_parameters={"model_name": "scale"}))
    tally = Tally()
    with requests.Session() as session:

        def send(case):
            try:
                r = case.call(base_url=base_url, session=session, timeout=60)
            except requests.RequestException as e:
                tally.add("dropped", f"{case.method} {case.formatted_path}: {type(e).__name__}: {e}")
                return
            check_rest(tally, case.method.upper(), case.formatted_path, r, f" body={str(case.body)[:80]}")

        drive(strategy, n, seed, send)
    return tally.as_dict()


def fuzz_grpc(target: str, n: int, seed: int = 0) -> dict:
    import grpc

    tally = Tally()
    with grpc.insecure_channel(target) as channel:

        def send(case):
            method, raw = case
            call = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
            try:
                call(raw, timeout=60)
                tally.add("OK")
            except grpc.RpcError as e:
                code = e.code().name
                tally.add(code, f"{method}: {code} {e.details()}" if code in GRPC_SERVER_FAULTS else None)

        drive(grpc_cases(), n, seed, send)
    return {"generated": tally.as_dict()}


def valid_answers(rest_url: str, grpc_target: str) -> tuple[bytes, bytes]:
    """The raw answers to one valid predict request over REST and gRPC (compared bit for bit)."""
    import grpc
    import httpx
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    r = httpx.post(f"{rest_url}/v1/models/scale:predict", json={"instances": VALID_X.tolist()}, timeout=60)
    if r.status_code != 200:
        raise RuntimeError(f"The valid REST request failed: HTTP {r.status_code} {r.text[:200]}")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "scale"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(VALID_X))
    with grpc.insecure_channel(grpc_target) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=60)
    return r.content, response.outputs["y"].SerializeToString()


def fuzz(rest_url: str, grpc_target: str, n: int, seed: int = 0) -> dict:
    """Both APIs, with the valid-request check before and after."""
    before = valid_answers(rest_url, grpc_target)
    rest = fuzz_rest(rest_url, n, seed)
    grpc_result = fuzz_grpc(grpc_target, n, seed)
    after = valid_answers(rest_url, grpc_target)
    return {"rest": rest, "grpc": grpc_result,
            "valid_request_unchanged": {"rest": before[0] == after[0], "grpc": before[1] == after[1]}}


def publish_fuzz_models(base) -> None:
    from benchmarks.serving_models import publish_count, publish_scale, publish_text

    publish_scale(base)
    publish_count(base)
    publish_text(base)


def run(args) -> dict:
    from benchmarks.serving_load import ServerProcess

    with tempfile.TemporaryDirectory(prefix="zoo-serving-fuzz-") as base:
        publish_fuzz_models(base)
        with ServerProcess(base, model="scale", extra=["--max-request-mb", "1"]) as server:
            result = fuzz(server.rest_url, server.grpc_target, args.requests, args.seed)
            alive = server.proc.poll() is None
    return {
        "machine": machine(),
        "server": "zoo serve in a subprocess on 127.0.0.1 (--max-request-mb 1), models scale (float32), "
                  "count (int32), text (string)",
        "requests_per_api": args.requests,
        "seed": args.seed,
        "server_alive_after": alive,
        **result,
    }


def _rows(result: dict) -> list[dict]:
    rows = []
    for api, part in (("REST (Hypothesis)", result["rest"]["generated"]),
                      ("REST (schemathesis, OpenAPI)", result["rest"]["schemathesis"]),
                      ("gRPC (Hypothesis)", result["grpc"]["generated"])):
        statuses = part["by_status"]
        server = sum(v for k, v in statuses.items() if k.isdigit() and int(k) >= 500 or k in GRPC_SERVER_FAULTS)
        rows.append({"api": api, "requests": part["requests"], "server_errors": server,
                     "dropped": statuses.get("dropped", 0), "failures": part["failures"],
                     "statuses": ", ".join(f"{k}: {v}" for k, v in statuses.items())})
    return rows


def markdown(result: dict) -> str:
    m = result["machine"]
    same = result["valid_request_unchanged"]
    return (
        "# Serving: fuzzing REST and gRPC\n\n"
        f"{result['server']}. Machine: {m['cpus']} CPUs ({m['cpu_model']}). Seed {result['seed']}. Server alive "
        f"afterwards: {result['server_alive_after']}; the valid request's answer unchanged, bit for bit: REST "
        f"{same['rest']}, gRPC {same['grpc']}.\n\n"
        + markdown_table(_rows(result), [("api", "API"), ("requests", "requests"), ("server_errors", "5xx / server "
                                         "faults"), ("dropped", "dropped"), ("failures", "failures"),
                                         ("statuses", "statuses")])
    )
