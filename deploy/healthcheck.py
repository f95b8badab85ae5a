"""The image's health check (the Dockerfile's HEALTHCHECK), by the process the container runs: the
web answers GET /health/ (the database, the checkpointer, the broker); a Celery worker answers a
ping over the broker; beat and the release step are healthy while they run. Exit status 0: healthy."""

import os
import socket
import subprocess
import sys
import urllib.request


def main() -> int:
    with open("/proc/1/cmdline", "rb") as file:
        command = [part.decode() for part in file.read().split(b"\0") if part]
    if any(part.endswith("uvicorn") for part in command):
        # A Host of ALLOWED_HOSTS' default, which the compose file and the manifests keep in it.
        request = urllib.request.Request(
            f"http://127.0.0.1:{os.environ.get('PORT', '8000')}/health/?format=json", headers={"Host": "localhost"}
        )
        try:
            with urllib.request.urlopen(request, timeout=8) as response:
                return 0 if response.status == 200 else 1
        except OSError as error:
            print(f"unhealthy: {error}", file=sys.stderr)
            return 1
    if "celery" in " ".join(command) and "worker" in command:
        ping = ["celery", "-A", "hitl_project", "inspect", "ping", "-d", f"celery@{socket.gethostname()}", "-t", "5"]
        return subprocess.run(ping, stdout=subprocess.DEVNULL, check=False).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
