"""`--model_config_file` as TF Serving reads it: the model list, base paths, version policies and labels,
TF Serving's validation, polling the file and HandleReloadConfigRequest; the TF Serving flags of `zoo serve`.

The expected behaviour is TF Serving's own: `tensorflow_serving/model_servers/server_core_test.cc` (test
names cited per case), `sources/storage_path/file_system_storage_path_source.cc` (policies) and
`g3doc/serving_config.md`.
"""

import time

import grpc
import httpx
import pytest
from google.protobuf import text_format
from tensorflow_serving.apis import model_management_pb2, model_service_pb2_grpc
from tensorflow_serving.config import model_server_config_pb2

from zoo.cli import build_parser, main
from zoo.deploy.serve import Server
from zoo.deploy.serve import model_config as mc
from zoo.deploy.serve.model_config import ConfigError, ModelEntry

from .versioned import config_text, publish, write_atomic


def _config(text):
    return text_format.Parse(text, model_server_config_pb2.ModelServerConfig())


def _version(server, path, status=200):
    r = httpx.post(f"{server.rest_url}/v1/models/{path}:predict", json={"instances": [[1.0]]}, timeout=30)
    assert r.status_code == status, (path, r.status_code, r.text)
    return int(r.json()["predictions"][0][0]) if status == 200 else r.json()["error"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """alpha versions 1..3, beta 1..2, gamma 1 (a folder no config lists)."""
    root = tmp_path_factory.mktemp("models")
    for name, vs in (("alpha", (1, 2, 3)), ("beta", (1, 2)), ("gamma", (1,))):
        for v in vs:
            publish(root / name, v)
    return root


# ---- the rules, no server ------------------------------------------------------------------------

def test_version_policies_pick_what_file_system_storage_path_source_picks():
    # file_system_storage_path_source.cc: latest N (N < 1 counts as 1; unset is latest), all, specific.
    on_disk = [1, 2, 3, 5]
    entries = mc.entries(_config(config_text(
        ("a", "/m/a", "", {}), ("b", "/m/b", "latest { num_versions: 2 }", {}), ("c", "/m/c", "all {}", {}),
        ("d", "/m/d", "specific { versions: 1 versions: 4 }", {}), ("e", "/m/e", "latest { num_versions: 0 }", {}))))
    assert [e.aspired(on_disk) for e in entries] == [[5], [3, 5], [1, 2, 3, 5], [1], [5]]
    assert ModelEntry("x", None, "tensorflow", "latest").aspired([]) == []


@pytest.mark.parametrize("text, message", [
    # server_core_test.cc: DuplicateModelNameInConfig
    (config_text(("a", "/m/a", "", {}), ("a", "/m/b", "", {})), "Illegal to list model a multiple times"),
    # RelativePathsServerCoreTest.RelativePathFails
    (config_text(("a", "m/a", "", {})), "Expected model a to have an absolute path or URI; got base_path()=m/a"),
    # UnknownModelPlatform
    ('model_config_list { config { name: "a" base_path: "/m/a" model_platform: "bogus" } }',
     "Model a requests unsupported platform bogus"),
    # IllegalConfigModelTypeAndPlatformSet
    ('model_config_list { config { name: "a" base_path: "/m/a" model_platform: "tensorflow" model_type: TENSORFLOW } }',
     "Illegal setting both ModelServerConfig::model_type"),
    ('model_config_list { config { name: "a" base_path: "/m/a" } }', "Illegal setting neither"),
])
def test_invalid_configs_fail_with_server_cores_messages(text, message):
    with pytest.raises(ConfigError) as e:
        mc.entries(_config(text))
    assert message in str(e.value)


def test_deprecated_model_type_and_relative_paths_under_a_root():
    # DeprecatedModelTypeConfig; RelativePathWithOptionsSucceeds
    (entry,) = mc.entries(_config('model_config_list { config { name: "a" base_path: "rel" model_type: TENSORFLOW } }'),
                          root_dir="/root")
    assert entry.platform == "tensorflow" and str(entry.base_path) == "/root/rel"


def test_labels_follow_update_model_version_label_map():
    (entry,) = mc.entries(_config(config_text(("m", "/m", "all {}", {"A": 1, "B": 9}))))
    # AssignLabelToUnavailableVersion: refused, FAILED_PRECONDITION
    with pytest.raises(ConfigError, match="not currently available for inference") as e:
        mc.check_labels([entry], {"m": [1, 2]}, {}, allow_unavailable=False)
    assert e.value.code == "FAILED_PRECONDITION"
    # AssignLabelToUnavailableVersionAllowed
    assert mc.check_labels([entry], {"m": [1, 2]}, {}, allow_unavailable=True) == {"m": {"A": 1, "B": 9}}
    # AssignExistingLabelToUnavailableVersionDisallowed: an existing label may not move to an unloaded version
    with pytest.raises(ConfigError, match="not currently available"):
        mc.check_labels([entry], {"m": [1, 2]}, {"m": {"B": 2}}, allow_unavailable=True)
    # AssignExistingLabelToUnavailableVersionAllowed: ... but may stay where it is
    assert mc.check_labels([entry], {"m": [1]}, {"m": {"B": 9}}, allow_unavailable=True)["m"]["B"] == 9


def test_a_config_that_does_not_parse_names_the_file_and_line(tmp_path):
    bad = tmp_path / "models.config"
    bad.write_text("model_config_list { config { name: 'a' bogus_field: 1 } }")
    with pytest.raises(ConfigError, match=r"--model_config_file=.*models.config is not a valid "
                                          r"tensorflow.serving.ModelServerConfig text proto: 1:"):
        mc.read_model_config_file(bad)


def test_zoo_serve_takes_tensorflow_model_servers_command_line():
    # The flags of tensorflow_serving/model_servers/main.cc, in both spellings, bools bare or =true/false.
    args = build_parser().parse_args([
        "serve", "--port=8500", "--rest_api_port", "8501", "--model_config_file=/models/models.config",
        "--model_config_file_poll_wait_seconds=60", "--file_system_poll_wait_seconds=2", "--enable_batching",
        "--batching_parameters_file=/b.txt", "--monitoring_config_file", "/m.txt",
        "--allow_version_labels_for_unavailable_models=true", "--rest_api_timeout_in_ms=5000",
        "--rest_api_enable_cors_support=false", "--model_name=m", "--model_base_path=/models/m"])
    assert (args.grpc_port, args.rest_port, args.model_config_file, args.model_config_file_poll_wait_seconds,
            args.poll_s, args.batching, args.batching_parameters_file, args.monitoring_config_file,
            args.allow_version_labels_for_unavailable_models, args.rest_api_timeout_in_ms,
            args.rest_api_enable_cors_support, args.model_name, args.model_base_path) == (
        8500, 8501, "/models/models.config", 60, 2, True, "/b.txt", "/m.txt", True, 5000, False, "m", "/models/m")
    old = build_parser().parse_args(["serve", "saved_models", "--grpc-port", "1", "--rest-port", "2", "--batching",
                                     "--poll-s", "0.5"])
    assert (old.grpc_port, old.rest_port, old.batching, old.poll_s) == (1, 2, True, 0.5)


def test_zoo_serve_refuses_a_bad_config_file_with_its_message(tmp_path, capsys):
    bad = tmp_path / "models.config"
    bad.write_text(config_text(("a", "relative/a", "", {})))
    assert main(["serve", f"--model_config_file={bad}", "--port=0", "--rest_api_port=0"]) == 2
    assert "Expected model a to have an absolute path or URI" in capsys.readouterr().err


# ---- served --------------------------------------------------------------------------------------

def test_config_serves_only_its_models_and_versions_and_a_reload_takes_effect(base, tmp_path):
    """Acceptance: two models, `specific` and `latest` policies, labels; the file polled and
    HandleReloadConfigRequest; a bad config (file or RPC) leaves the old one serving."""
    path = tmp_path / "models.config"
    write_atomic(path, config_text(("alpha", base / "alpha", "specific { versions: 1 versions: 2 }", {"stable": 1}),
                                   ("beta", base / "beta", "", {})))
    with Server(None, rest_port=0, grpc_port=0, poll_s=0.05, config_file=path, config_poll_s=0.05,
                allow_unavailable_labels=True) as server:
        assert server.store.served() == {"alpha": [1, 2], "beta": [2]}
        assert _version(server, "alpha") == 2  # the highest of the specific versions, not 3
        assert _version(server, "alpha/labels/stable") == 1
        assert "Specific(alpha, 3)" in _version(server, "alpha/versions/3", 404)
        assert _version(server, "beta") == 2
        assert "Specific(beta, 1)" in _version(server, "beta/versions/1", 404)  # latest: version 2 only
        assert "Latest(gamma)" in _version(server, "gamma", 404)  # a folder the config does not list

        # The file changes: alpha moves to latest 2 with a new label, beta to all, gamma is added.
        write_atomic(path, config_text(("alpha", base / "alpha", "latest { num_versions: 2 }", {"stable": 2}),
                                       ("beta", base / "beta", "all {}", {}), ("gamma", base / "gamma", "", {})))
        _wait(lambda: server.store.served() == {"alpha": [2, 3], "beta": [1, 2], "gamma": [1]})
        assert _version(server, "alpha/labels/stable") == 2 and _version(server, "alpha") == 3
        assert _version(server, "beta/versions/1") == 1 and _version(server, "gamma") == 1

        # A bad file is logged and changes nothing.
        write_atomic(path, config_text(("alpha", base / "alpha", "", {}), ("alpha", base / "beta", "", {})))
        time.sleep(0.3)
        assert server.store.served() == {"alpha": [2, 3], "beta": [1, 2], "gamma": [1]}

        with grpc.insecure_channel(server.grpc_target) as channel:
            stub = model_service_pb2_grpc.ModelServiceStub(channel)
            request = model_management_pb2.ReloadConfigRequest()
            request.config.CopyFrom(_config(config_text(("beta", base / "beta", "specific { versions: 1 }", {}))))
            response = stub.HandleReloadConfigRequest(request, timeout=30)
            assert response.status.error_code == 0
            # ReloadConfigUnloadsModels: the models the new config drops are unloaded when the call returns
            assert server.store.served() == {"beta": [1]}
            assert "Latest(alpha)" in _version(server, "alpha", 404)

            bad = model_management_pb2.ReloadConfigRequest()
            bad.config.CopyFrom(_config(config_text(("beta", "relative", "", {}))))
            with pytest.raises(grpc.RpcError) as e:
                stub.HandleReloadConfigRequest(bad, timeout=30)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "absolute path" in e.value.details()
            labelled = model_management_pb2.ReloadConfigRequest()
            labelled.config.CopyFrom(_config(config_text(("beta", base / "beta", "specific { versions: 1 }",
                                                          {"next": 2}))))
            server.store.allow_unavailable_labels = False  # AssignLabelToUnavailableVersion over the RPC
            with pytest.raises(grpc.RpcError) as e:
                stub.HandleReloadConfigRequest(labelled, timeout=30)
            assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert server.store.served() == {"beta": [1]} and _version(server, "beta") == 1


def test_labels_at_startup_need_allow_version_labels_for_unavailable_models(base, tmp_path):
    # server_core.cc checks labels before the first config's versions load: TF Serving refuses to start.
    path = tmp_path / "models.config"
    write_atomic(path, config_text(("beta", base / "beta", "all {}", {"stable": 1})))
    with pytest.raises(ConfigError, match="not currently available for inference"):
        Server(None, rest_port=0, grpc_port=0, poll_s=0, config_file=path).start()


def test_model_name_and_base_path_serve_the_latest_version(base):
    with Server(None, rest_port=0, grpc_port=0, poll_s=0, config=mc.single_model_config("m", base / "alpha")) as s:
        assert s.store.served() == {"m": [3]}
    with pytest.raises(ConfigError, match="absolute path"):  # BuildSingleModelConfig's path is checked too
        Server(None, rest_port=0, grpc_port=0, poll_s=0, config=mc.single_model_config("m", "alpha")).start()


def _wait(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
