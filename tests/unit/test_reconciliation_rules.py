"""The Spark-free rules of reconciliation on every commit (lakeloader.engine.reconciliation): a commit's
summaries read into what the table reports, and the invariants every correct batch keeps."""

from __future__ import annotations

from lakeloader.engine.reconciliation import (
    Asked,
    CommitReconciliation,
    Reported,
    combine,
    from_run_counts,
    reconcile,
    reported_from_summaries,
)

MERGE_COUNTS = "spark.merge-into.num-target-rows-{}"


def summary(records: int, position: int = 0, equality: int = 0, **extra: int) -> dict[str, str]:
    found = {
        "total-records": str(records),
        "total-position-deletes": str(position),
        "total-equality-deletes": str(equality),
    }
    return found | {k.replace("_", "-"): str(v) for k, v in extra.items()}


def merge_counts(inserted: int, updated: int, deleted: int) -> dict[str, str]:
    return {
        MERGE_COUNTS.format(k): str(v)
        for k, v in zip(("inserted", "updated", "deleted"), (inserted, updated, deleted), strict=True)
    }


def test_totals_become_this_commits_deltas_and_a_first_commit_starts_at_zero():
    reported = reported_from_summaries(summary(10, 3, 1), summary(8, 1))
    assert (reported.records_delta, reported.deletes_delta, reported.live_delta) == (2, 3, -1)
    first = reported_from_summaries(summary(5), None)
    assert (first.records_delta, first.deletes_delta, first.live_delta) == (5, 0, 5)
    assert reported.merge_counts is None and not reported.rewrote_files


def test_merge_counts_and_rewritten_files_are_read_from_the_summary():
    reported = reported_from_summaries(summary(4, deleted_data_files=3) | merge_counts(1, 2, 1), summary(4))
    assert reported.merge_counts == (1, 2, 1) and reported.rewrote_files


def test_a_summary_without_totals_reports_no_live_change_and_is_a_mismatch():
    reported = reported_from_summaries({"added-records": "3"}, {})
    assert reported.live_delta is None
    found = reconcile(Asked(mode="merge", upserts=3, deletes=0, expected=(3, 0, 0)), reported)
    assert not found.ok and "no total-records" in found.mismatches[0]


def test_a_clean_merge_on_read_batch_agrees():
    # 2 inserts, 3 updates, 1 delete; 1 late upsert and 1 delete of an absent key asked as well
    asked = Asked(mode="merge", upserts=6, deletes=2, superseded=4, late=1, expected=None)
    reported = Reported(inserted=2, updated=3, deleted=1, records_delta=5, deletes_delta=4)
    found = reconcile(asked, reported, snapshot_id=7)
    assert found.ok, found.mismatches
    assert (found.inserted, found.updated, found.deleted, found.live_delta, found.snapshot_id) == (
        2,
        3,
        1,
        1,
        7,
    )
    assert "agrees" in found.describe()


def test_an_update_touching_two_rows_of_a_key_breaks_the_upsert_bound():
    """Spark 4.1: the MERGE's own counts; a twin of key 2 makes its one update touch two rows."""
    asked = Asked(mode="merge", upserts=2, deletes=0)
    reported = Reported(inserted=1, updated=2, deleted=0, records_delta=3, deletes_delta=2)
    found = reconcile(asked, reported)
    assert found.mismatched_commits == 1
    assert any("3 row(s) inserted or updated for 2 upsert(s)" in m for m in found.mismatches)
    assert "MISMATCH" in found.describe()


def test_late_upserts_are_not_applicable():
    asked = Asked(mode="merge", upserts=2, deletes=0, late=1)
    assert not reconcile(
        asked, Reported(inserted=2, updated=0, deleted=0, records_delta=2, deletes_delta=0)
    ).ok
    assert reconcile(asked, Reported(inserted=1, updated=0, deleted=0, records_delta=1, deletes_delta=0)).ok


def test_more_rows_deleted_than_deletes_asked_is_a_mismatch():
    asked = Asked(mode="merge", upserts=0, deletes=1)
    found = reconcile(asked, Reported(inserted=0, updated=0, deleted=2, records_delta=0, deletes_delta=2))
    assert any("2 row(s) deleted for 1 delete(s) asked" in m for m in found.mismatches)


def test_spark_35_the_plan_held_against_the_rows_the_commit_wrote():
    """No MERGE counts: the classification's plan (1 update) against a merge-on-read commit that wrote 2
    rows and 2 delete records for it."""
    asked = Asked(mode="merge", upserts=1, deletes=0, expected=(0, 1, 0))
    assert reconcile(asked, Reported(records_delta=1, deletes_delta=1)).ok
    found = reconcile(asked, Reported(records_delta=2, deletes_delta=2))
    assert any("added 2 data row(s) for 0 insert(s) and 1 update(s)" in m for m in found.mismatches)
    assert any("added 2 delete record(s) for 1 update(s) and 0 delete(s)" in m for m in found.mismatches)


def test_live_rows_must_change_by_inserted_less_deleted():
    asked = Asked(mode="merge", upserts=1, deletes=1, expected=(1, 0, 1))
    # copy-on-write: rewritten files add their copied rows again, so only the live change is held
    assert reconcile(asked, Reported(records_delta=0, deletes_delta=0, rewrote_files=True)).ok
    found = reconcile(asked, Reported(records_delta=-1, deletes_delta=0, rewrote_files=True))
    assert found.mismatches == [
        "the table's live rows changed by -1, but 1 rows were inserted and 1 deleted (+0)"
    ]


def test_the_merge_must_do_what_the_engine_planned_when_both_are_known():
    asked = Asked(mode="merge", upserts=2, deletes=0, expected=(1, 1, 0))
    found = reconcile(asked, Reported(inserted=2, updated=0, deleted=0, records_delta=2, deletes_delta=0))
    assert found.mismatches == ["the MERGE did (2, 0, 0), the engine planned (1, 1, 0)"]


def test_no_counts_at_all_is_a_mismatch():
    found = reconcile(Asked(mode="merge", upserts=1, deletes=0), Reported(records_delta=1, deletes_delta=0))
    assert not found.ok and "no row counts" in found.mismatches[0]


def test_scd2_versions_opened_closed_and_dropped():
    asked = Asked(mode="scd2", upserts=3, deletes=1, expected=(3, 2, 1))
    # merge-on-read: 3 opened + 2 closed rows written; 2 closes + 1 drop deleted; live +2
    assert reconcile(asked, Reported(records_delta=5, deletes_delta=3)).ok
    assert reconcile(asked, Reported(inserted=3, updated=2, deleted=1, records_delta=5, deletes_delta=3)).ok
    twin = reconcile(asked, Reported(inserted=3, updated=3, deleted=1, records_delta=6, deletes_delta=4))
    assert any("a key with more than one current version" in m for m in twin.mismatches)
    without_plan = reconcile(
        Asked(mode="scd2", upserts=1, deletes=0), Reported(records_delta=1, deletes_delta=0)
    )
    assert any("without the engine's plan" in m for m in without_plan.mismatches)


def test_reconciliations_add_up_and_travel_through_the_run_record():
    clean = reconcile(Asked(mode="merge", upserts=1, deletes=0), Reported(1, 0, 0, 1, 0), snapshot_id=1)
    bad = reconcile(Asked(mode="merge", upserts=1, deletes=0), Reported(0, 2, 0, 2, 2), snapshot_id=2)
    total = combine(clean, bad)
    assert total is not None
    assert (total.commits, total.mismatched_commits, total.inserted, total.updated, total.snapshot_id) == (
        2,
        1,
        1,
        2,
        2,
    )
    assert total.mismatches == bad.mismatches and clean.mismatches == []
    assert combine(None, None) is None and combine(clean, None).commits == 1
    counts = total.run_counts()
    assert counts["reconcile_commits"] == 2 and counts["reconcile_mismatched_commits"] == 1
    assert "reconcile_snapshot_id" in counts and all(isinstance(v, int) for v in counts.values())
    assert from_run_counts(counts | {"inserted": 5})["mismatched_commits"] == 1
    assert from_run_counts({"inserted": 5}) is None
    assert from_run_counts(CommitReconciliation().run_counts()) is None  # nothing reconciled


def test_on_mismatch_is_a_per_table_setting_alarm_by_default():
    import pytest
    from pydantic import ValidationError

    from lakeloader.config import TableConfig

    spec = {
        "id": "a.b",
        "source": {"prefix": "a/"},
        "target": {"database": "a", "table": "b"},
        "keys": ["id"],
    }
    assert TableConfig.model_validate(spec).reconcile.on_mismatch == "alarm"
    failing = TableConfig.model_validate(spec | {"reconcile": {"on_mismatch": "fail"}})
    assert failing.reconcile.on_mismatch == "fail"
    with pytest.raises(ValidationError, match="on_mismatch"):
        TableConfig.model_validate(spec | {"reconcile": {"on_mismatch": "ignore"}})


def test_a_commit_counts_what_it_asked_and_says_so_in_one_line():
    """The reconciliation carries what the batch asked (upserts, deletes, superseded, late), and its
    line says whether the table agrees, or lists every broken invariant."""
    asked = Asked(mode="merge", upserts=6, deletes=2, superseded=4, late=1)
    found = reconcile(asked, Reported(inserted=2, updated=3, deleted=1, records_delta=5, deletes_delta=4))
    assert (found.upserts_asked, found.deletes_asked, found.superseded, found.late) == (6, 2, 4, 1)
    assert found.describe() == (
        "reconciled 1 commit(s): asked 6 upsert(s) and 2 delete(s) (4 superseded, 1 late); the table "
        "reports 2 inserted, 3 updated, 1 deleted, live rows +1: agrees"
    )
    twice = CommitReconciliation(
        commits=2, mismatched_commits=2, mismatches=["rows", "deletes"], live_delta=-3, inserted=1000
    )
    assert twice.describe().endswith(
        "1,000 inserted, 0 updated, 0 deleted, live rows -3: MISMATCH in 2 commit(s): rows; deletes"
    )


def test_each_commits_mismatches_are_kept_when_reconciliations_add_up():
    one = reconcile(Asked(mode="merge", upserts=1, deletes=0), Reported(0, 2, 0, 2, 2))
    other = reconcile(Asked(mode="merge", upserts=0, deletes=1), Reported(0, 0, 2, 0, 2))
    assert combine(one, other).mismatches == one.mismatches + other.mismatches


def test_a_commit_without_counts_or_totals_is_counted_as_nothing_done():
    found = reconcile(Asked(mode="merge", upserts=1, deletes=0), Reported())
    assert (found.inserted, found.updated, found.deleted, found.live_delta) == (0, 0, 0, 0)
    assert found.mismatches == [
        "the commit reports no row counts and the engine planned none",
        "the commit's summary has no total-records/total-*-deletes to reconcile with",
    ]


def test_one_missing_delete_total_leaves_the_delete_change_unknown():
    for missing in ("total-position-deletes", "total-equality-deletes"):
        given = {k: v for k, v in summary(5, 1, 1).items() if k != missing}
        assert reported_from_summaries(given, summary(4)).deletes_delta is None, missing


def test_mismatch_lines_name_versions_for_scd2_and_the_counts_in_order():
    asked = Asked(mode="scd2", upserts=3, deletes=1, expected=(3, 2, 1))
    found = reconcile(asked, Reported(inserted=4, updated=5, deleted=6, records_delta=0, deletes_delta=0))
    assert (
        "the MERGE inserted, updated and deleted 4, 5 and 6 row(s) for 3 version(s) opened, 2 closed and 1 "
        "replaced: a key with more than one current version?" in found.mismatches
    )
    live = reconcile(asked, Reported(records_delta=9, deletes_delta=0, rewrote_files=True))
    assert live.mismatches == [
        "the table's live rows changed by +9, but 3 versions were inserted and 1 deleted (+2)"
    ]
    without_plan = reconcile(
        Asked(mode="scd2", upserts=1, deletes=0), Reported(records_delta=1, deletes_delta=0)
    )
    assert "scd2 commit without the engine's plan" in without_plan.mismatches
    merge = reconcile(Asked(mode="merge", upserts=0, deletes=1), Reported(0, 0, 2, -2, 0, rewrote_files=True))
    assert merge.mismatches == [
        "2 row(s) deleted for 1 delete(s) asked: a key the table holds more than once?"
    ]
