"""`zoo serve`: the TF Serving-compatible development server."""

from __future__ import annotations

import dataclasses
import os
import sys

from zoo.cli.common import add_untrusted_flags, trust_from_args
from zoo.cli.common import positive_int as _positive_int


def add(sub):
    p = sub.add_parser(
        "serve",
        help="serve saved_models/ over TF Serving's REST and gRPC APIs (development); models.config, docker command",
        description="A local TF Serving-compatible server for development and tests. Production runs TF Serving "
                    "itself on the same directory and models.config: see --write-config and --print-docker.",
    )
    p.add_argument("base_dir", nargs="?", default="saved_models", help="TF Serving base directory (saved_models)")
    p.add_argument("--models", default=None, help="comma-separated model names (default: every model found)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (loopback by default; another address is reachable from other machines "
                        "and the server warns)")
    # TF Serving's own flags (tensorflow_serving/model_servers/main.cc), so a tensorflow_model_server command line
    # runs unchanged; zoo's earlier short names stay as aliases.
    tf = p.add_argument_group("TF Serving flags (tensorflow_model_server's names; --flag=value or --flag value)")
    tf.add_argument("--rest_api_port", "--rest-port", dest="rest_port", type=int, default=8501,
                    help="REST port (default 8501; 0 picks a free one)")
    tf.add_argument("--port", "--grpc-port", dest="grpc_port", type=int, default=8500,
                    help="gRPC port (default 8500; 0 picks a free one)")
    tf.add_argument("--model_name", default="default", help="name of the --model_base_path model (default 'default')")
    tf.add_argument("--model_base_path", default=None,
                    help="serve this one model directory (absolute, as TF Serving requires); ignored with "
                         "--model_config_file")
    tf.add_argument("--model_config_file", default=None,
                    help="a ModelServerConfig text proto: the models, base paths, version policies and labels")
    tf.add_argument("--model_config_file_poll_wait_seconds", type=float, default=0,
                    help="re-read --model_config_file this often (0: once); a bad file keeps the old config")
    tf.add_argument("--file_system_poll_wait_seconds", "--poll-s", dest="poll_s", type=float, default=1.0,
                    help="seconds between scans for new or removed versions (default 1; 0: only at start)")
    tf.add_argument("--allow_version_labels_for_unavailable_models", type=_bool, nargs="?", const=True,
                    default=False, metavar="BOOL", help="a label may name a version that is not loaded yet")
    tf.add_argument("--enable_batching", "--batching", dest="batching", type=_bool, nargs="?", const=True,
                    default=False, metavar="BOOL", help="run concurrent requests as batches")
    tf.add_argument("--batching_parameters_file", default=None,
                    help="a BatchingParameters text proto (max_batch_size, batch_timeout_micros, ...)")
    tf.add_argument("--monitoring_config_file", default=None,
                    help="a MonitoringConfig text proto; prometheus_config { enable: true } serves "
                         "/monitoring/prometheus/metrics")
    tf.add_argument("--rest_api_timeout_in_ms", type=int, default=None,
                    help="REST deadline in ms (default: --request-timeout-s, 30 s, as TF Serving's 30000)")
    tf.add_argument("--rest_api_enable_cors_support", "--rest-api-enable-cors-support", type=_bool, nargs="?",
                    const=True, default=False,
                    metavar="BOOL", help="answer CORS preflights and add CORS headers")
    p.add_argument("--labels", action="append", default=[], metavar="MODEL:LABEL=VERSION",
                   help="a version label, e.g. convnet_bn:stable=1 (repeatable)")
    p.add_argument("--policy", default="all", help="models.config version policy: all, latest, latest:N, specific")
    p.add_argument("--keep", type=_positive_int, default=None, help="first remove all but the newest N versions")
    p.add_argument("--write-config", nargs="?", const="", default=None, metavar="PATH",
                   help="write models.config (default <base_dir>/models.config) and exit")
    p.add_argument("--print-docker", action="store_true", help="print the `docker run` command for TF Serving and exit")
    add_untrusted_flags(p)
    from zoo.deploy.serve import limits

    limits.add_arguments(p)
    p.set_defaults(func=_cmd_serve)


def _bool(text: str) -> bool:
    """A TF Serving bool flag's value (tensorflow/core/util/command_line_flags.cc: true/false, 1/0)."""
    value = text.strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


_bool.__name__ = "bool"  # argparse's message: "invalid bool value"


def _cmd_serve(args) -> int:
    from zoo.deploy import serve as serving
    from zoo.deploy.serve import limits

    models = [m for m in (args.models or "").split(",") if m] or None
    labels = serving.parse_labels(args.labels)
    if args.keep:
        for name in models or serving.model_names(args.base_dir):
            removed = serving.prune(os.path.join(args.base_dir, name), args.keep)
            if removed:
                print(f"{name}: removed versions {removed}")
    if args.write_config is not None or args.print_docker:
        if args.write_config is not None:
            path = serving.write_config(args.base_dir, models, path=args.write_config or None, labels=labels,
                                        policy=args.policy)
            print(f"wrote {path}", file=sys.stderr if args.print_docker else sys.stdout)
        if args.print_docker:
            print(serving.docker_command(args.base_dir, rest_port=args.rest_port, grpc_port=args.grpc_port))
        return 0
    from zoo.deploy.serve.model_config import single_model_config

    config = None
    if args.model_config_file is None and args.model_base_path is not None:
        config = single_model_config(args.model_name, args.model_base_path)
    run_limits = limits.from_args(args)
    if args.rest_api_timeout_in_ms is not None:
        run_limits = dataclasses.replace(run_limits, request_timeout_s=args.rest_api_timeout_in_ms / 1000)
    server = serving.Server(args.base_dir, host=args.host, rest_port=args.rest_port, grpc_port=args.grpc_port,
                            poll_s=args.poll_s, batching=args.batching, batching_parameters=args.batching_parameters_file,
                            models=models, labels=labels, limits=run_limits, trust=trust_from_args(args),
                            config=config, config_file=args.model_config_file,
                            config_poll_s=args.model_config_file_poll_wait_seconds,
                            allow_unavailable_labels=args.allow_version_labels_for_unavailable_models,
                            monitoring=args.monitoring_config_file, cors=args.rest_api_enable_cors_support)
    server.serve_forever(ready=lambda s: print(
        f"serving {s.store.served()} from {args.base_dir}: REST {s.rest_url}, gRPC {s.grpc_target} "
        "(development server; production: zoo serve --print-docker). Ctrl-C stops.", flush=True))
    return 0
