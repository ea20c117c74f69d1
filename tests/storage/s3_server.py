"""A real S3-compatible server (moto's server mode) on loopback, in its own process.

Its own process, not moto's ThreadedMotoServer inside the test process:
delta-rs holds the GIL while it waits for S3, so an in-process server thread
could never answer it. The child exits when its stdin closes, so it dies
with the process that started it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "lakelog-test", "AWS_SECRET_ACCESS_KEY": "lakelog-test", "AWS_REGION": "us-east-1"}

_CHILD = """
import logging, sys
logging.getLogger("werkzeug").setLevel(logging.ERROR)
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()
server.stop()
"""


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        """The AWS settings lakelog (Spark's S3A and its Python side) reads for this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, **CREDENTIALS}

    def client(self):  # boto3 S3 client
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=CREDENTIALS["AWS_REGION"],
        )

    def create_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name


@contextlib.contextmanager
def s3_server() -> Iterator[S3Server]:
    """Start moto's server on a free loopback port; stop it on exit."""
    env = {**os.environ, **CREDENTIALS}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        port = child.stdout.readline().strip() if child.stdout else ""
        if not port.isdigit():
            raise RuntimeError(f"moto server did not start (exit code {child.poll()})")
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        if child.stdin:
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
