"""The ledger's plain values, without DynamoDB: an object's identity and address, the batch a byte
budget admits, the timestamps and error texts items hold, an item read back into its record, and the
age the sweep reports for a table's oldest open file. test_ledger.py runs them on moto."""

from __future__ import annotations

import hashlib

import pytest

from lakeloader.control.dynamodb import encode_item
from lakeloader.control.ledger import (
    MAX_ERROR_CHARS,
    PENDING,
    LedgerObject,
    ObjectRef,
    RunRecord,
    object_id_for,
)
from lakeloader.control.ledger.base import clip_error, utc_now_iso
from lakeloader.control.ledger.objects import within_bytes
from lakeloader.control.trigger.metrics import pending_age_seconds


def test_an_objects_identity_is_its_version_else_its_etag_else_its_sequencer():
    assert object_id_for("k", version_id="v1", etag="e", sequencer="s") == "k#v1"
    assert object_id_for("k", version_id="null", etag=' "e1" ', sequencer="s") == "k#e1"
    assert object_id_for("k", version_id="", etag='""', sequencer="0055AED6") == "k#0055AED6"
    assert object_id_for("k", etag="  ") == "k#-"
    ref = ObjectRef("raw", "crm/a b.csv", etag='"e2"', version_id="null", size=5)
    assert (ref.etag, ref.version_id, ref.object_id) == ("e2", None, "crm/a b.csv#e2")
    assert ref.uri == "s3://raw/crm/a b.csv"


def test_a_key_too_long_for_a_sort_key_is_known_by_its_hash():
    fits = "p/" + "x" * (1024 - len("p/#e"))
    assert object_id_for(fits, etag="e") == f"{fits}#e"  # 1,024 bytes exactly
    longer = fits + "x"
    digest = hashlib.sha256(longer.encode()).hexdigest()
    assert object_id_for(longer, etag="e") == f"sha256:{digest}#e"
    wide = "é" * 512  # 1,024 bytes in UTF-8 (1,026 with "#e"), 512 characters
    assert object_id_for(wide, etag="e").startswith("sha256:")


def sized(*sizes: int | None) -> list[LedgerObject]:
    return [LedgerObject("t", f"o{i}", "raw", f"k{i}", PENDING, size=size) for i, size in enumerate(sizes)]


def test_a_byte_budget_admits_the_leading_objects_that_fit_and_a_large_one_alone():
    objects = sized(4, 4, 4, None, 4)
    assert within_bytes(objects, None) == objects
    assert within_bytes(objects, 8) == objects[:2]
    assert within_bytes(objects, 12) == objects[:4]  # an object of unknown size costs nothing
    assert within_bytes(objects, 11) == objects[:2]
    huge = sized(100, 1)
    assert within_bytes(huge, 10) == huge[:1]  # alone, or it would never load
    assert within_bytes(huge, 10, at_least_one=False) == []
    assert within_bytes(huge, 100, at_least_one=False) == huge[:1]


def test_timestamps_are_utc_with_milliseconds():
    assert utc_now_iso(0) == "1970-01-01T00:00:00.000Z"
    assert utc_now_iso(1714564800.1239) == "2024-05-01T12:00:00.123Z"
    assert utc_now_iso(1714564800.5) == "2024-05-01T12:00:00.500Z"
    assert len(utc_now_iso()) == len("2024-05-01T12:00:00.123Z") and utc_now_iso() > "2026"


def test_an_error_too_long_for_an_item_keeps_its_head_and_its_tail():
    assert clip_error(None) is None
    assert clip_error(ValueError("bad")) == "bad"
    fits = "x" * MAX_ERROR_CHARS
    assert clip_error(fits) == fits
    text = "".join(chr(ord("a") + i % 26) for i in range(MAX_ERROR_CHARS + 1))
    clipped = clip_error(text)
    head, tail = clipped.split("\n...[truncated]...\n")
    assert head == text[: MAX_ERROR_CHARS * 2 // 3]
    assert tail == text[-(MAX_ERROR_CHARS - len(head) - 20) :]
    assert len(clipped) <= MAX_ERROR_CHARS


def test_an_item_reads_back_as_its_record_ignoring_what_the_record_does_not_hold():
    item = encode_item(
        {
            "table_id": "t",
            "object_id": "k#e",
            "bucket": "raw",
            "key": "k",
            "status": "done",
            "size": 7,
            "attempts": 2,
            "expires_at": 1,  # an attribute of another record
        }
    )
    obj = LedgerObject.from_item(item)
    assert obj == LedgerObject("t", "k#e", "raw", "k", "done", size=7, attempts=2)
    assert obj.ref == ObjectRef("raw", "k", size=7) and obj.uri == "s3://raw/k"
    assert LedgerObject.from_item({}) == LedgerObject("", "", "", "", PENDING)
    run = RunRecord.from_item(encode_item({"table_id": "t", "run_id": "r", "counts": {"inserted": 3}}))
    assert run == RunRecord("t", "r", "running", counts={"inserted": 3})


@pytest.mark.parametrize(
    ("arrivals", "age"),
    [
        ([], 0.0),
        ([("2024-05-01T11:00:00.000Z", None), ("2024-05-01T10:00:00Z", None)], 7200.0),
        ([(None, "2024-05-01T11:30:00.000Z"), (None, None)], 1800.0),  # first seen, where no event time
        ([("2024-05-01T12:30:00.000Z", None)], 0.0),  # a writer's clock ahead: never negative
    ],
)
def test_the_sweep_reports_the_age_of_the_oldest_open_file(arrivals, age):
    now = 1714564800.0  # 2024-05-01T12:00:00Z
    objects = [
        LedgerObject("t", f"o{i}", "raw", f"k{i}", PENDING, event_time=event, first_seen=seen)
        for i, (event, seen) in enumerate(arrivals)
    ]
    assert pending_age_seconds(objects, now) == age
