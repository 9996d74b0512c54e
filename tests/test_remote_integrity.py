"""Object storage never returns wrong data nor leaks a secret (issue 17, items 2, 3, 11, 12).

A replaced object is not read as the old one; S3 keys are opaque (``?``, ``#``, ``%2F`` are
part of the key); no error message or repr carries a credential; a long final key segment
does not make the writer's local staging name too long.
"""

from __future__ import annotations

import errno
import urllib.parse

import numpy as np
import pytest

from ffrecord import FileReader, FileWriter, ObjectChangedError
from ffrecord.errors import CorruptFileError

from range_server import RangeServer
from remote_fixtures import bucket, keys, s3_endpoint  # noqa: F401 - fixtures


def ffr_bytes(tmp_path, samples: list[bytes], name: str = "f.ffr") -> bytes:
    path = tmp_path / name
    with FileWriter(path, len(samples)) as w:
        w.write_many(samples)
    return path.read_bytes()


def same_shape(seed: int) -> list[bytes]:
    """Samples of fixed sizes: two files of them have the same header but for checksums."""
    rng = np.random.default_rng(seed)
    return [rng.bytes(1000) for _ in range(50)]


# -- item 2: an object replaced after open ---------------------------------------------------


@pytest.mark.parametrize("check_data", [True, False])
def test_object_replaced_over_http_is_not_read_as_the_old_one(tmp_path, check_data):
    old, new = ffr_bytes(tmp_path, same_shape(1)), ffr_bytes(tmp_path, same_shape(2))
    assert len(old) == len(new)
    with RangeServer({"/f.ffr": old}) as srv:
        with FileReader(srv.url + "/f.ffr", check_data) as r:
            assert r.read_one(3).tobytes() == same_shape(1)[3]
            srv.objects["/f.ffr"] = new
            with pytest.raises(ObjectChangedError, match="changed since it was opened") as info:
                r.read(range(r.n))
            assert info.value.errno == errno.ESTALE
            assert isinstance(info.value, OSError) and not isinstance(info.value, CorruptFileError)
            assert "checksum" not in str(info.value)
        with FileReader(srv.url + "/f.ffr", check_data) as r:  # reopened: the new object
            assert [s.tobytes() for s in r.read(range(r.n))] == same_shape(2)


@pytest.mark.parametrize("check_data", [True, False])
def test_object_replaced_on_s3_is_not_read_as_the_old_one(tmp_path, bucket, check_data):
    client, name, opts = bucket
    client.put_object(Bucket=name, Key="f.ffr", Body=ffr_bytes(tmp_path, same_shape(1)))
    with FileReader(f"s3://{name}/f.ffr", check_data, storage_options=opts) as r:
        client.put_object(Bucket=name, Key="f.ffr", Body=ffr_bytes(tmp_path, same_shape(2)))
        with pytest.raises(ObjectChangedError, match="changed since it was opened"):
            r.read(range(r.n))


# -- item 3: S3 keys are opaque --------------------------------------------------------------

OPAQUE_KEYS = ["results?v2.ffr", "a#frag.ffr", "x%2Fy.ffr", "ünïcode ✓ 1+1=2&more.ffr",
               "dir/" + "k" * 300 + ".ffr"]  # a final segment longer than a local file name


@pytest.mark.parametrize("key", OPAQUE_KEYS, ids=["query", "fragment", "escape", "unicode", "long"])
def test_s3_keys_are_written_and_read_verbatim(bucket, key):
    client, name, opts = bucket
    for neighbour in ("results", "a", "x/y.ffr", "x%2Fy"):
        client.put_object(Bucket=name, Key=neighbour, Body=b"not yours")
    samples = [b"first", b"", b"third" * 100]
    with FileWriter(f"s3://{name}/{key}", len(samples), storage_options=opts) as w:
        w.write_many(samples)
    assert keys(client, name) == sorted([key, "results", "a", "x/y.ffr", "x%2Fy"])
    for neighbour in ("results", "a", "x/y.ffr", "x%2Fy"):
        assert client.get_object(Bucket=name, Key=neighbour)["Body"].read() == b"not yours"
    with FileReader(f"s3://{name}/{key}", storage_options=opts) as r:
        assert [s.tobytes() for s in r.read(range(r.n))] == samples
    prefix = f"s3://{name}/" + key.rpartition("/")[0]
    with FileReader(prefix + ("/" if "/" in key else ""), storage_options=opts) as r:
        assert r.fnames == [f"s3://{name}/{key}"]  # a listed key opens as itself


@pytest.mark.parametrize("name", ["a b.ffr", "a?b.ffr", "a#b.ffr", "ü.ffr", "a%2Fb.ffr"])
def test_file_urls_name_the_same_file_for_writers_and_readers(tmp_path, name):
    """Writers resolve file:// URLs in Python, readers in the core: they must agree."""
    url = "file://" + urllib.parse.quote(str(tmp_path / name))
    with FileWriter(url, 1) as w:  # Python's reading of the URL
        w.write_one(name.encode())
    assert [p.name for p in tmp_path.iterdir()] == [name]
    with FileReader(url) as r:  # the core's
        assert r.fnames == [str(tmp_path / name)] and r.read_one(0).tobytes() == name.encode()
    for elsewhere in ("file://host/x.ffr", "file://host" + str(tmp_path / name)):
        with pytest.raises(ValueError):
            FileReader(elsewhere)
        with pytest.raises(ValueError):
            FileWriter(elsewhere, 1)


def test_the_core_reads_paths_and_judges_options_for_python():
    """``_remote`` asks the core (``ffr_locate``, ``ffr_check_options``): its answers are the
    core's, and a bad option is named without its value."""
    from ffrecord import _remote

    assert [_remote.is_url(p) for p in ("S3://b/k", "https://h/a", "s3:/b", "file:///a", "a")] == [
        True, True, False, False, False]
    assert _remote.local_path("file://localhost/a%3Fb#c") == "/a?b"
    for bad, named in (({"endpoint": "x", "regoin": "y"}, "['endpoint' 'regoin']"),
                       ({"env": {"AWS_REGION": "x"}}, "['env']"),
                       ({"timeout": "hunter2-secret"}, "storage option timeout")):
        with pytest.raises(ValueError) as caught:
            _remote.encode_options(bad)
        assert named.replace("'", '"') in str(caught.value) and "hunter2" not in str(caught.value)


def test_bad_s3_urls_are_value_errors(bucket):
    _, name, opts = bucket
    for url in (f"s3://{name}/" + "k" * 1025, "s3:///key.ffr", "s3://b?x/k.ffr", "s3://user@b/k.ffr"):
        with pytest.raises(ValueError, match="bad URL"):
            FileReader(url, storage_options=opts)


# -- item 11: no secret in any message or repr -----------------------------------------------

SECRET = "Zq7SECRETvalue-d1st1nct1ve+/xyz"


def messages_of(call) -> list[str]:
    """The messages of what ``call`` raises, with its causes, and its repr."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - every kind of failure is looked at
        seen, out = exc, []
        while seen is not None:
            out += [str(seen), repr(seen), *map(str, getattr(seen, "args", ()))]
            seen = seen.__cause__ or seen.__context__
        return out
    pytest.fail(f"{call} raised nothing")


def test_no_secret_in_errors_or_reprs(tmp_path, monkeypatch, bucket):
    client, name, opts = bucket
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SECRET)
    url = f"s3://{name}/f.ffr"
    bad_options = [{"timeout": "5"}, {"timeout": SECRET}, {"concurrency": SECRET}, {"retries": 1.5},
                   {"anonymous": SECRET}, {"virtual_hosted": SECRET}, {"region": 5}, {"timeout": -1},
                   {"timeout": float("nan")}, {"endpoint_url": f"ftp://AKID:{SECRET}@127.0.0.1"},
                   {"endpoint_url": f"http://AKID:{SECRET}@[::1"}, {"no_such_option": SECRET},
                   {"timeout": b"5"}]
    failures = []
    for options in bad_options:
        failures += messages_of(lambda: FileReader(url, storage_options=options))
        failures += messages_of(lambda: FileWriter(url, 1, storage_options=options).close())
    bad_urls = [f"https://AKID:{SECRET}@127.0.0.1:1/f.ffr", f"https://AKID:{SECRET[:-4]}@h/f.ffr", f"http://AKID:{SECRET}@[::1/f.ffr",
                f"s3://AKID:{SECRET}@{name}/f.ffr", f"s3://{name}/" + "k" * 1025, "s3:///k.ffr"]
    for bad in bad_urls:
        failures += messages_of(lambda: FileReader(bad, storage_options=opts))
        failures += messages_of(lambda: FileWriter(bad, 1, storage_options=opts))
    with RangeServer() as srv:  # an S3 endpoint that refuses every signed request
        srv.always = 403
        refused = {"endpoint_url": srv.url, "retries": -1}
        failures += messages_of(lambda: FileReader(f"s3://{name}/f.ffr", storage_options=refused))
        with FileWriter(f"s3://{name}/w.ffr", 1, storage_options=refused) as w:
            w.write_one(b"x")
            failures.append(repr(w))
            failures += messages_of(w.close)
    with FileWriter(url, 1, storage_options=opts) as w:
        w.write_one(b"x")
        failures.append(repr(w))
    with FileReader(url, storage_options=opts) as r:
        failures += [repr(r), str(r.fnames)]
    pieces = {SECRET[k:k + 8] for k in range(len(SECRET) - 7)}  # a secret cut short leaks too
    leaked = [m for m in failures if any(p in m for p in pieces)]
    assert not leaked, leaked
    assert any("timeout must be a JSON number, not a string" in m for m in failures)
    assert any("with credentials" in m for m in failures)
