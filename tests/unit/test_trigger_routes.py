"""Routing keys to tables (control.trigger.routes): longest prefix wins, unknown and disabled prefixes
are counted and logged, and the config table is cached per Lambda container."""

from __future__ import annotations

from lakeloader.control import contract
from lakeloader.control import trigger as trigger_module
from lakeloader.control.ledger import FAILED, PENDING, SKIPPED
from lakeloader.control.trigger import TableRoute, match_routes
from lakeloader.control.trigger.routes import route_for
from tests.unit import trigger_world
from tests.unit.trigger_world import CUSTOMERS, HANDLER, RAW, World, context, log_lines, s3_event, s3_record

# pytest fixtures: the trigger world (config, ledger and runs tables, a Glue job) on one moto server
world = trigger_world.world
aws_endpoint = trigger_world.aws_endpoint
moto_server = trigger_world.moto_server


def test_unknown_prefix_is_counted_and_logged(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS)
    summary = HANDLER(s3_event(s3_record("hr/public/employees/1.parquet")), context("req-u"))
    assert (summary["records"], summary["unknown"], summary["recorded"]) == (1, 1, 0)
    assert summary["started"] == {} and summary["deferred"] == []
    assert world.ledger.objects("crm.customers") == []
    assert world.glue_runs() == []
    [line] = [x for x in log_lines(capsys) if x["message"] == "object.unknown_prefix"]
    assert (line["level"], line["key"], line["bucket"], line["correlation_id"]) == (
        "WARNING",
        "hr/public/employees/1.parquet",
        RAW,
        "req-u",
    )


def test_disabled_table_is_counted_recorded_and_not_started(world: World, capsys):
    world.add_table("crm.customers", CUSTOMERS, enabled=False)
    summary = HANDLER(s3_event(s3_record(CUSTOMERS + "1.parquet")), context())
    assert (summary["disabled"], summary["recorded"], summary["started"]) == (1, 0, {})
    assert world.glue_runs() == []
    # kept as pending so that enabling the table loses nothing
    assert [o.status for o in world.ledger.objects("crm.customers")] == [PENDING]
    assert any(x["message"] == "object.table_disabled" for x in log_lines(capsys))

    # enabled again: the sweep starts it
    world.add_table("crm.customers", CUSTOMERS, enabled=True)
    swept = HANDLER({"lakeloader": {"action": "sweep"}}, context())
    assert list(swept["started"]) == ["crm.customers"]


def test_longest_prefix_wins_with_nested_prefixes(world: World):
    world.add_table("crm.all", "crm/")
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("crm.customers_gdpr", CUSTOMERS + "gdpr/", enabled=False)
    summary = HANDLER(
        s3_event(
            s3_record(CUSTOMERS + "1.parquet", etag="a"),
            s3_record("crm/public/orders/1.parquet", etag="b"),
            s3_record("crm/public/customers_archive/1.parquet", etag="c"),  # not under customers/
            s3_record(CUSTOMERS + "gdpr/1.parquet", etag="d"),  # the disabled nested table owns it
        ),
        context(),
    )
    assert (summary["recorded"], summary["disabled"]) == (3, 1)
    assert [o.key for o in world.ledger.objects("crm.customers")] == [CUSTOMERS + "1.parquet"]
    assert sorted(o.key for o in world.ledger.objects("crm.all")) == [
        "crm/public/customers_archive/1.parquet",
        "crm/public/orders/1.parquet",
    ]
    assert [o.key for o in world.ledger.objects("crm.customers_gdpr")] == [CUSTOMERS + "gdpr/1.parquet"]
    assert sorted(summary["started"]) == ["crm.all", "crm.customers"]


def test_match_routes_normalises():
    routes = [TableRoute("a", "x/"), TableRoute("b", "x/y/"), TableRoute("c", "z/", enabled=False)]
    assert [r.table_id for r in match_routes("x/y/f", routes)] == ["b"]
    assert [r.table_id for r in match_routes("/x/f", routes)] == ["a"]
    assert match_routes("x", routes) == []
    assert [r.table_id for r in match_routes("z/f", routes)] == ["c"]
    assert contract.normalise_prefix("/crm/public") == "crm/public/"


def test_config_is_cached_per_container(world: World, monkeypatch):
    monkeypatch.setenv("CONFIG_CACHE_SECONDS", "300")
    world.add_table("crm.customers", CUSTOMERS)
    assert HANDLER(s3_event(s3_record(CUSTOMERS + "1.parquet")), context())["recorded"] == 1
    world.add_table("sales.order_lines", "sales/public/order_lines/")
    # still the cached config: the new table is unknown until the cache ages out
    assert HANDLER(s3_event(s3_record("sales/public/order_lines/1.csv")), context())["unknown"] == 1
    trigger_module.clear_caches()
    assert HANDLER(s3_event(s3_record("sales/public/order_lines/1.csv")), context())["recorded"] == 1


def test_a_config_item_becomes_its_route_whatever_the_spelling_of_its_flags():
    item = {
        "table_id": "crm.customers",
        "prefix": "/crm/customers",
        "enabled": True,
        "engine": " EMR ",
        "min_interval_seconds": "300",
        "execution_class": " flex",
    }
    assert route_for(item) == TableRoute("crm.customers", "crm/customers/", True, "emr", 300, "FLEX")
    assert route_for(item).batched
    plain = route_for({"table_id": "a", "prefix": "a/"})  # an item as an older deploy wrote it
    assert plain == TableRoute("a", "a/", enabled=True, engine="glue", min_interval_seconds=0)
    assert not plain.batched and plain.execution_class == "STANDARD"
    for enabled, expected in (
        ("false", False),
        ("True", True),
        (" yes ", True),
        ("0", False),
        (False, False),
    ):
        assert route_for({**item, "enabled": enabled}).enabled is expected, enabled
    for window, expected in ((-5, 0), ("soon", 0), (None, 0), ([1], 0), (1, 1), ("60", 60)):
        assert route_for({**item, "min_interval_seconds": window}).min_interval_seconds == expected, window


def test_an_item_without_a_table_id_or_a_prefix_has_no_route():
    for item in (
        {"prefix": "a/"},
        {"table_id": "", "prefix": "a/"},
        {"table_id": "a"},
        {"table_id": "a", "prefix": "/"},
    ):
        assert route_for(item) is None, item


def test_tables_sharing_a_prefix_each_record_the_object_and_start_their_run(world: World):
    """A current table and its SCD2 history over one CDC prefix: one ledger entry and one run each, and
    what happens to one table's entry leaves the other's as it is."""
    world.add_table("crm.customers", CUSTOMERS)
    world.add_table("crm.customers_history", CUSTOMERS)
    world.add_table("crm.all", "crm/")  # a shorter prefix still loses
    key = CUSTOMERS + "20240501-1200.parquet"
    summary = HANDLER(s3_event(s3_record(key)), context("req-s"))
    assert (summary["records"], summary["recorded"]) == (1, 2)
    assert sorted(summary["started"]) == ["crm.customers", "crm.customers_history"]
    assert sorted(r["Arguments"]["--lakeloader_table_id"] for r in world.glue_runs()) == [
        "crm.customers",
        "crm.customers_history",
    ]
    assert world.ledger.objects("crm.all") == []
    [current] = world.ledger.objects("crm.customers")
    [history] = world.ledger.objects("crm.customers_history")
    assert (current.key, current.status) == (history.key, history.status) == (key, PENDING)

    # the history's run fails on the file, then a user skips it there: the current table's entry is
    # untouched and its run still takes the file
    run = "run-history"
    assert world.ledger.acquire_lock("crm.customers_history", run)
    batch = world.ledger.next_batch("crm.customers_history", run)
    world.ledger.finish("crm.customers_history", batch, run, FAILED, "bad row")
    [failed] = world.ledger.objects("crm.customers_history")
    world.ledger.skip("crm.customers_history", [failed], note="test: given up on the history only")
    assert [o.status for o in world.ledger.objects("crm.customers_history")] == [SKIPPED]
    assert [o.status for o in world.ledger.objects("crm.customers")] == [PENDING]
    assert world.ledger.acquire_lock("crm.customers", "run-current")  # takes over the trigger's start
    assert [o.key for o in world.ledger.next_batch("crm.customers", "run-current")] == [key]


def test_a_success_marker_goes_only_to_the_snapshot_table_of_a_shared_prefix(world: World):
    world.add_table("crm.customers", CUSTOMERS)
    world.dynamodb.put_item(
        TableName=world.config_table,
        Item={
            "table_id": {"S": "crm.customers_snapshots"},
            "prefix": {"S": CUSTOMERS},
            "success_markers": {"BOOL": True},
            "config": {"S": "{}"},
        },
    )
    summary = HANDLER(s3_event(s3_record(CUSTOMERS + "2024-05-01/_SUCCESS")), context())
    assert list(summary["started"]) == ["crm.customers_snapshots"]
    assert world.ledger.objects("crm.customers") == []
