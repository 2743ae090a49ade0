"""The image's HEALTHCHECK: GET /healthz of whatever the container runs.

``faceweave serve`` answers on ``FACEWEAVE_PORT`` (8000), ``faceweave worker``
on its ``--health-port`` (8001); a one-shot command (``swap``, ``verify``...)
has no server and counts as healthy.  Standard library only, one request,
exit 0 (healthy) or 1.
"""

from __future__ import annotations

import os
import sys
import urllib.request


def _command() -> list[str]:
    try:
        with open("/proc/1/cmdline", "rb") as handle:
            return [part.decode("utf-8", "replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return []


def health_url(argv: list[str], environ: dict[str, str]) -> str | None:
    """The /healthz address for the container's command line, or None when it runs no server."""
    if "serve" in argv:
        port = environ.get("FACEWEAVE_PORT", "8000")
        for i, arg in enumerate(argv):
            if arg == "--port" and i + 1 < len(argv):
                port = argv[i + 1]
            elif arg.startswith("--port="):
                port = arg.split("=", 1)[1]
    elif "worker" in argv:
        port = "8001"
        for i, arg in enumerate(argv):
            if arg == "--health-port" and i + 1 < len(argv):
                port = argv[i + 1]
            elif arg.startswith("--health-port="):
                port = arg.split("=", 1)[1]
        if port == "0":
            return None
    else:
        return None
    return f"http://127.0.0.1:{port}/healthz"


def main() -> int:
    url = health_url(_command(), dict(os.environ))
    if url is None:
        return 0
    try:
        with urllib.request.urlopen(url, timeout=4) as answer:
            return 0 if answer.status == 200 else 1
    except OSError as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
