"""``python -m simulator``: run the product-API simulator."""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
import sys

from .faults import DEFAULT_RETRY_AFTER, DEFAULT_SLOW_DELAY, MODES, FaultConfig
from .server import Simulator, serve
from .shapes import DEFAULT_SHAPE, SHAPES

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8931


def _whole(text: str, maximum: int | None = None) -> int:
    if not (text.isascii() and text.isdigit()) or (maximum is not None and int(text) > maximum):
        limit = "" if maximum is None else f" up to {maximum}"
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number{limit}")
    return int(text)


def _port(text: str) -> int:
    return _whole(text, 65535)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m simulator",
        description="A deterministic product JSON API (GET /v1/product/{id}) with opt-in faults.",
        epilog="Fault modes: " + ", ".join(sorted(MODES)) + ". IDSPEC is a comma list of ids, "
               "FIRST-LAST ranges, %N and %N+R residues; TIMES is a count (default 1) or *.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT, help="0 picks a free port")
    parser.add_argument("--catalog-version", type=_whole, metavar="N",
                        help="pin the catalogue version (default: the current UTC hour number)")
    parser.add_argument("--fault", action="append", default=[], metavar="MODE=IDSPEC[@TIMES]",
                        help="answer matching ids with a fault; repeatable")
    parser.add_argument("--retry-after", default=DEFAULT_RETRY_AFTER, metavar="S",
                        help="Retry-After seconds of 429s, 429date and 503ra (default %(default)s)")
    parser.add_argument("--slow-delay", default=DEFAULT_SLOW_DELAY, metavar="S",
                        help="delay of the slow mode in seconds (default %(default)s)")
    parser.add_argument("--rate-limit", metavar="R",
                        help="answer 429 when more than R requests arrive within one second")
    parser.add_argument("--shape", default=DEFAULT_SHAPE, choices=SHAPES,
                        help="JSON shape of a product (default %(default)s, the article's)")
    parser.add_argument("--api-key", metavar="KEY",
                        help="answer 401 to requests without 'Authorization: Bearer KEY'")
    parser.add_argument("--revoke-after", metavar="N",
                        help="answer 401 to every product request after the first N (a revoked key)")
    parser.add_argument("--tls-cert", metavar="FILE", help="serve https with this certificate (PEM)")
    parser.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = FaultConfig.build(args.fault, retry_after=args.retry_after,
                                   slow_delay=args.slow_delay, rate_limit=args.rate_limit,
                                   shape=args.shape, api_key=args.api_key, revoke_after=args.revoke_after)
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s [%(name)s] %(levelname)s: %(message)s")
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    tls = None
    if args.tls_cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    simulator = Simulator(config, catalog_version=args.catalog_version)
    try:
        asyncio.run(serve(simulator, args.host, args.port, tls))
    except OSError as exc:
        logger.error("Cannot listen on %s:%s: %s", args.host, args.port, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
