"""What several commands share: argument types and flags. Imports nothing heavy."""

from __future__ import annotations

from zoo.core.options import NON_NEGATIVE_INT, POSITIVE_INT

positive_int = POSITIVE_INT.argparse_type
non_negative_int = NON_NEGATIVE_INT.argparse_type


def add_measure_flags(p) -> None:
    """How many test examples and latency runs a measurement takes: `zoo export` and `zoo benchmark` alike."""
    p.add_argument("--eval-samples", type=positive_int, default=None, help="at most this many test examples")
    p.add_argument("--latency-runs", type=non_negative_int, default=50,
                   help="batch-1 runs timed per artifact, after warm-up (0: skip)")


def trust_from_args(args):
    """The `zoo.deploy.formats.unsafe.Trust` the flags of `add_untrusted_flags` give."""
    from zoo.deploy.formats.unsafe import Trust

    return Trust(args.allow_unsafe_ops or (), getattr(args, "unsafe_deserialization", False))


def add_untrusted_flags(p, keras: bool = False) -> None:
    """The flags with which a user accepts what `zoo scan` found (`zoo.deploy.formats.unsafe.Trust`); for every command
    that loads a user's artifact (serve, export, predict, val)."""
    p.add_argument("--allow-unsafe-ops", default=None, metavar="OP,OP",
                   help="accept exactly these ops that `zoo scan` reported (after review); no wildcards")
    if keras:
        p.add_argument("--unsafe-deserialization", action="store_true",
                       help="load .keras files with Keras safe_mode off: Lambda bytecode in the file runs")
