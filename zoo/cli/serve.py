"""`zoo serve`: the TF Serving-compatible development server."""

from __future__ import annotations

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
    p.add_argument("--rest-port", type=int, default=8501)
    p.add_argument("--grpc-port", type=int, default=8500)
    p.add_argument("--poll-s", type=float, default=1.0, help="seconds between scans for new or removed versions")
    p.add_argument("--batching", action="store_true", help="run concurrent requests as one batch")
    p.add_argument("--labels", action="append", default=[], metavar="MODEL:LABEL=VERSION",
                   help="a version label, e.g. convnet_bn:stable=1 (repeatable)")
    p.add_argument("--policy", default="all", help="models.config version policy: all, latest, latest:N, specific")
    p.add_argument("--keep", type=_positive_int, default=None, help="first remove all but the newest N versions")
    p.add_argument("--write-config", nargs="?", const="", default=None, metavar="PATH",
                   help="write models.config (default <base_dir>/models.config) and exit")
    p.add_argument("--print-docker", action="store_true", help="print the `docker run` command for TF Serving and exit")
    p.add_argument("--rest_api_enable_cors_support", "--rest-api-enable-cors-support", dest="cors",
                   action="store_true", help="CORS headers on every REST response (TF Serving's flag of that name)")
    add_untrusted_flags(p)
    from zoo.deploy.serve import limits

    limits.add_arguments(p)
    p.set_defaults(func=_cmd_serve)


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
    server = serving.Server(args.base_dir, host=args.host, rest_port=args.rest_port, grpc_port=args.grpc_port,
                            poll_s=args.poll_s, batching=args.batching, models=models, labels=labels,
                            limits=limits.from_args(args), trust=trust_from_args(args), cors=args.cors)
    server.serve_forever(ready=lambda s: print(
        f"serving {s.store.served()} from {args.base_dir}: REST {s.rest_url}, gRPC {s.grpc_target} "
        "(development server; production: zoo serve --print-docker). Ctrl-C stops.", flush=True))
    return 0
