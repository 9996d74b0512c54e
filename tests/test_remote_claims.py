"""Writers' claims on an ``s3://`` prefix (moto on 127.0.0.1): a claim carries a random token,
a writer gives up only its own (a conditional DELETE on the ETag it read), publishes only
while its claim is still its own, and publishes ``spec.json`` by a conditional PUT, so that a
dataset completed meanwhile is never replaced (``FileExistsError``, as locally)."""

from __future__ import annotations

import pytest

from ffrecord import FFRecordWarning, _remote
from ffrecord.dataset import DatasetReader, DatasetWriter
from ffrecord.dataset.claim import RemoteClaim
from ffrecord.utils import dump
from remote_fixtures import bucket, keys, s3_endpoint  # noqa: F401 - fixtures

SPEC = {"n": "int", "who": "utf8"}


def writer(url: str, opts: dict, who: str, count: int = 3) -> DatasetWriter:
    made = DatasetWriter(url, SPEC, storage_options=opts)
    for k in range(count):
        made.append({"n": k, "who": who})
    return made


def claim_body(client, name: str, prefix: str) -> bytes:
    return client.get_object(Bucket=name, Key=f"{prefix}/.ffrecord-writer")["Body"].read()


def objects(client, name: str, prefix: str) -> dict[str, str]:
    """Each object under the prefix and its ETag: what a writer must leave alone."""
    listing = client.list_objects_v2(Bucket=name, Prefix=prefix + "/")
    return {o["Key"]: o["ETag"] for o in listing.get("Contents", [])}


def test_an_abort_never_deletes_another_writers_claim(bucket):
    """The issue's three writers: the first's claim is removed by hand (taken for a killed
    writer's), a second claims the prefix, the first aborts; a third must still be refused."""
    client, name, opts = bucket
    url = f"s3://{name}/ds/"
    first = writer(url, opts, "first")
    client.delete_object(Bucket=name, Key="ds/.ffrecord-writer")
    second = writer(url, opts, "second")
    held = claim_body(client, name, "ds")
    with pytest.warns(FFRecordWarning, match="left in place: it is another writer's claim now"):
        first.abort()
    assert claim_body(client, name, "ds") == held
    with pytest.raises(FileExistsError, match="claimed by a writer"):
        DatasetWriter(url, SPEC, storage_options=opts)
    second.close()
    with DatasetReader(url, storage_options=opts) as reader:
        assert [d["who"] for d in reader] == ["second"] * 3
    assert keys(client, name) == ["ds/_manifest/v000001.ffr", "ds/n.ffr", "ds/spec.json", "ds/who.ffr"]  # its own claim gone


def test_a_writer_whose_claim_was_taken_never_replaces_the_dataset(bucket):
    """The second writer completes the dataset while the first still writes: the first's
    close() refuses before uploading anything, and the dataset stays the second's."""
    client, name, opts = bucket
    url = f"s3://{name}/ds/"
    first = writer(url, opts, "first", count=5)
    client.delete_object(Bucket=name, Key="ds/.ffrecord-writer")
    writer(url, opts, "second").close()
    completed = objects(client, name, "ds")
    with pytest.raises(FileExistsError, match="this writer's claim was removed or replaced while it wrote"):
        first.close()
    assert objects(client, name, "ds") == completed
    with DatasetReader(url, storage_options=opts) as reader:
        assert [d["who"] for d in reader] == ["second"] * 3


def test_spec_json_is_published_only_where_none_is(bucket, monkeypatch):
    """A dataset completed between the writer's checks and its publishing (two writers that
    both think they hold the prefix): the conditional PUT refuses, the writer deletes the
    field files it uploaded, and the other's spec.json stays as it was."""
    client, name, opts = bucket
    url = f"s3://{name}/ds/"
    late = writer(url, opts, "late")
    upload_all = _remote.upload_all

    def another_completes_meanwhile(pairs, options):
        upload_all(pairs, options)
        client.put_object(Bucket=name, Key="ds/spec.json", Body=b'{"theirs": true}')

    monkeypatch.setattr(_remote, "upload_all", another_completes_meanwhile)
    with pytest.raises(FileExistsError, match="a dataset was completed here by another writer"):
        late.close()
    assert keys(client, name) == ["ds/spec.json"]
    assert client.get_object(Bucket=name, Key="ds/spec.json")["Body"].read() == b'{"theirs": true}'


def test_a_spec_json_of_ours_whose_answer_was_lost_is_removed(bucket, monkeypatch):
    """Publishing fails after the object arrived (the answer lost, no retry left): the
    writer's spec.json is removed again with its field files; nothing looks complete."""
    client, name, opts = bucket
    late = writer(f"s3://{name}/ds/", opts, "late")
    put_new = _remote.put_new

    def arrives_then_fails(url, options, data):
        put_new(url, options, data)
        raise OSError("connection reset")

    monkeypatch.setattr(_remote, "put_new", arrives_then_fails)
    with pytest.raises(OSError, match="connection reset") as info:
        late.close()
    assert not getattr(info.value, "__notes__", None)
    assert keys(client, name) == []


def test_release_checks_and_leaves_what_is_not_its_own(bucket):
    client, name, opts = bucket
    claim = RemoteClaim(f"s3://{name}/p", opts)
    claim.check()
    client.put_object(Bucket=name, Key="p/.ffrecord-writer", Body=b"pid 7 on elsewhere (token)\n")
    with pytest.raises(FileExistsError, match=r"claim was removed or replaced .*now: pid 7 on elsewhere"):
        claim.check()
    with pytest.warns(FFRecordWarning, match="left in place"):
        claim.release()
    assert claim_body(client, name, "p") == b"pid 7 on elsewhere (token)\n"
    claim.release()  # idempotent: nothing more asked
    mine = RemoteClaim(f"s3://{name}/q", opts)
    client.delete_object(Bucket=name, Key="q/.ffrecord-writer")
    with pytest.raises(FileExistsError, match="now: removed"):
        mine.check()
    mine.release()  # gone already: nothing to do, no warning


def test_a_dump_whose_claim_was_taken_uploads_nothing(bucket, monkeypatch):
    client, name, opts = bucket
    url = f"s3://{name}/parts/"
    run_tasks = dump.__globals__["_runner"].run_tasks

    def claim_taken_meanwhile(*args, **kwargs):
        result = run_tasks(*args, **kwargs)
        client.delete_object(Bucket=name, Key="parts/.ffrecord-writer")
        client.put_object(Bucket=name, Key="parts/.ffrecord-writer", Body=b"pid 9 on other\n")
        return result

    monkeypatch.setattr(dump.__globals__["_runner"], "run_tasks", claim_taken_meanwhile)
    with pytest.warns(FFRecordWarning, match="left in place"):
        with pytest.raises(FileExistsError, match="claim was removed or replaced"):
            dump([b"a", b"b", b"c"], url, nfiles=2, storage_options=opts, max_workers=1)
    assert keys(client, name) == ["parts/.ffrecord-writer"]
