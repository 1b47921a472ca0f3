"""`advisor serve`: the REST API and web form under uvicorn (imports them only when run)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("serve", help="run the REST API and web form (uvicorn)",
                              description="Serve the REST API under /v1, OpenAPI docs at /docs "
                              "and the web form at /. Limits and CORS: ADVISOR_MAX_BODY_BYTES, "
                              "ADVISOR_CORS_ORIGINS (comma-separated; default: CORS off). "
                              "Calibration-profile writes need ADVISOR_API_TOKEN (unset: read-only).")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--log-level", default="info",
                   choices=("critical", "error", "warning", "info", "debug"))
    p.set_defaults(run=run)


def _listen(host: str, port: int):
    """The listening socket, created as TCP explicitly.

    asyncio turns on TCP_NODELAY only for sockets whose protocol is IPPROTO_TCP; the socket
    uvicorn binds itself for several workers has protocol 0, so each response (headers and body
    are two writes) waited for the client's delayed ACK: ~40 ms per request.
    """
    import socket

    from advisor.core.errors import InvalidInput

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInput("port", f"cannot listen on {host}:{port}: {exc.strerror}",
                           "a free port on a local address") from None
    sock.set_inheritable(True)
    return sock


def run(args: argparse.Namespace) -> int:
    from advisor.core.errors import InvalidInput

    if not 0 <= args.port <= 65535:
        raise InvalidInput("port", f"{args.port} is not a TCP port", "0 to 65535")
    if not 1 <= args.workers <= 256:
        raise InvalidInput("workers", f"{args.workers} workers", "1 to 256")
    try:
        import uvicorn
        from uvicorn.supervisors import Multiprocess
    except ImportError:
        raise InvalidInput("serve", "uvicorn and fastapi are not installed",
                           "pip install 'advisor[api]'") from None
    # loop="asyncio", not uvloop: the handlers run the cost model inline, and under uvloop a
    # burst of uncached searches starved some connections for seconds (p99 3.3 s vs 0.86 s).
    config = uvicorn.Config("api.app:create_app", factory=True, host=args.host, port=args.port,
                            workers=args.workers, log_level=args.log_level, server_header=False,
                            loop="asyncio")
    sock = _listen(args.host, args.port)
    print(f"advisor serve: http://{args.host}:{sock.getsockname()[1]}/ ({args.workers} worker"
          f"{'s' if args.workers > 1 else ''}; API docs at /docs)", flush=True)
    try:
        if args.workers > 1:
            Multiprocess(config, sockets=[sock]).run()
        else:
            uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    return 0
