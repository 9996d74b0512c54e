"""Fixtures for object-storage tests: moto's S3 server on loopback and fresh buckets."""

from __future__ import annotations

import os
import uuid

import pytest

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_endpoint():
    """moto's S3 server on 127.0.0.1, with credentials in the environment."""
    moto_server = pytest.importorskip("moto.server")
    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def bucket(s3_endpoint):
    """A fresh bucket: ``(boto3 client, name, storage_options)``."""
    boto3 = pytest.importorskip("boto3")
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    name = f"b-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    return client, name, {"endpoint_url": s3_endpoint}


def keys(client, name: str, prefix: str = "") -> list[str]:
    listing = client.list_objects_v2(Bucket=name, Prefix=prefix)
    return sorted(o["Key"] for o in listing.get("Contents", []))
