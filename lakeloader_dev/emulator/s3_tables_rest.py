"""The Amazon S3 Tables Iceberg REST endpoint on the emulator (`<endpoint>/iceberg`).

AWS's endpoint (`https://s3tables.<region>.amazonaws.com/iceberg`, warehouse = the table bucket's ARN,
SigV4 signing name `s3tables`; "Accessing tables using the Amazon S3 Tables Iceberg REST endpoint",
S3 User Guide) "works by translating Iceberg REST API operations into corresponding S3 Tables
operations". So does this one, on moto's `s3tables` backend: a table the REST catalog creates is the
table the S3 Tables API lists, gets, renames and deletes (CreateTable makes its storage bucket), and
a commit moves the table's metadata location through UpdateTableMetadataLocation's version token.
`maintain`, the readers and teardown, which call the S3 Tables API, see what the jobs wrote.

A commit is applied here, server-side, as the REST protocol asks: the requirements are checked
against the table's current metadata and the updates applied with pyiceberg's implementation of the
spec (`pyiceberg.table.update`), the new metadata file is written into the table's storage, then the
table points at it. The Java client writes only data and manifest files (S3FileIO, against the
emulator's S3). Requests arrive SigV4-signed with the signing name `s3tables`, which is how moto
routes them to this service; the signature is not checked, as moto checks none.

Not served: views, multi-table transactions, credential vending (the jobs ask for none: their own
role reads and writes the files), pagination (one page).
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from pydantic import ValidationError

ROUTE = "{0}/iceberg/(?P<iceberg_path>.*)$"
_PATH = re.compile(r"^/iceberg/v1/(?:(?P<arn>arn:[^/]+/[^/]+)/)?(?P<rest>.*?)/?$")
_METADATA_NAME = re.compile(r"^(\d+)-[0-9a-f-]+\.metadata\.json$")
_COMMITS = threading.Lock()  # one commit at a time: read, check, write, point
JSON_HEADERS = {"Content-Type": "application/json"}


class RestError(Exception):
    """An Iceberg REST ErrorModel: the Java client maps `type` and `code` to its exceptions."""

    def __init__(self, code: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.code, self.kind, self.message = code, kind, message

    def response(self) -> tuple[int, dict[str, str], str]:
        body = {"error": {"message": self.message, "type": self.kind, "code": self.code}}
        return self.code, JSON_HEADERS, json.dumps(body)


def prefix_of(table_bucket_arn: str) -> str:
    """The catalog's path prefix (GetConfig's `prefix` override): the table bucket's ARN, URL-encoded."""
    return quote(table_bucket_arn, safe="")


def handle(request: Any, full_url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    """Every `/iceberg/...` request signed for `s3tables` (moto's route; `full_url` is the raw URL)."""
    url = urlsplit(full_url)
    match = _PATH.match(unquote(url.path))
    query = {key: values[-1] for key, values in parse_qs(url.query).items()}
    try:
        if match is None:
            raise RestError(404, "NoSuchEndpointException", f"not an Iceberg REST path: {url.path}")
        body = json.loads(request.data or b"{}") if request.method in ("POST", "PUT") else {}
        arn = match["arn"] or query.get("warehouse", "")  # GetConfig names the warehouse
        status, result = _Catalog(arn).route(request.method, match["rest"].split("/"), body)
    except RestError as error:
        return error.response()
    except ValidationError as error:
        return RestError(400, "BadRequestException", str(error)).response()
    return status, JSON_HEADERS, "" if result is None else json.dumps(result)


class _Catalog:
    """One table bucket as an Iceberg REST catalog, over moto's S3 Tables and S3 backends."""

    def __init__(self, table_bucket_arn: str) -> None:
        from moto.s3.models import s3_backends
        from moto.s3tables.exceptions import NotFoundException
        from moto.s3tables.models import s3tables_backends

        parts = table_bucket_arn.split(":")
        if len(parts) != 6 or not parts[5].startswith("bucket/"):
            raise RestError(400, "BadRequestException", f"not a table bucket ARN: {table_bucket_arn!r}")
        partition, region, account = parts[1], parts[3], parts[4]
        self.arn = table_bucket_arn
        self.tables = s3tables_backends[account][region]
        self.s3 = s3_backends[account][partition]
        try:
            self.bucket = self.tables.get_table_bucket(table_bucket_arn)
        except NotFoundException as error:
            raise RestError(404, "NoSuchWarehouseException", f"{table_bucket_arn}: {error.message}") from None

    def route(self, method: str, path: list[str], body: dict[str, Any]) -> tuple[int, Any]:
        match (method, path):
            case ("GET", ["config"]):
                return 200, {"defaults": {}, "overrides": {"prefix": prefix_of(self.arn)}}
            case ("GET", ["namespaces"]):
                return 200, {"namespaces": [[name] for name in sorted(self.bucket.namespaces)]}
            case ("POST", ["namespaces"]):
                return 200, self.create_namespace(body)
            case ("GET" | "HEAD", ["namespaces", namespace]):
                self.namespace(namespace)
                return (200, {"namespace": [namespace], "properties": {}}) if method == "GET" else (204, None)
            case ("DELETE", ["namespaces", namespace]):
                self.drop_namespace(namespace)
                return 204, None
            case ("GET", ["namespaces", namespace, "tables"]):
                tables = self.namespace(namespace).tables.values()
                names = sorted(t.name for t in tables if t.metadata_location is not None)
                return 200, {"identifiers": [{"namespace": [namespace], "name": name} for name in names]}
            case ("POST", ["namespaces", namespace, "tables"]):
                return 200, self.create_table(namespace, body)
            case ("GET" | "HEAD", ["namespaces", namespace, "tables", name]):
                loaded = self.load_table(namespace, name)
                return (200, loaded) if method == "GET" else (204, None)
            case ("POST", ["namespaces", namespace, "tables", name]):
                return 200, self.commit(namespace, name, body)
            case ("DELETE", ["namespaces", namespace, "tables", name]):
                self.drop_table(namespace, name)
                return 204, None
            case ("POST", ["namespaces", _, "tables", _, "metrics"]):
                return 204, None  # scan and commit reports: accepted, not kept
            case ("POST", ["tables", "rename"]):
                self.rename_table(body)
                return 204, None
        raise RestError(400, "BadRequestException", f"{method} /v1/{'/'.join(path)} is not served here")

    # --- namespaces ------------------------------------------------------------------------------

    def namespace(self, encoded: str) -> Any:
        name = _single_level(encoded)
        if name not in self.bucket.namespaces:
            raise RestError(404, "NoSuchNamespaceException", f"Namespace does not exist: {name}")
        return self.bucket.namespaces[name]

    def create_namespace(self, body: dict[str, Any]) -> dict[str, Any]:
        [name] = body["namespace"]
        if name in self.bucket.namespaces:
            raise RestError(409, "AlreadyExistsException", f"Namespace already exists: {name}")
        self.tables.create_namespace(table_bucket_arn=self.arn, namespace=name)
        return {"namespace": [name], "properties": {}}

    def drop_namespace(self, encoded: str) -> None:
        namespace = self.namespace(encoded)
        if namespace.tables:
            raise RestError(409, "NamespaceNotEmptyException", f"Namespace {namespace.name} is not empty")
        self.tables.delete_namespace(table_bucket_arn=self.arn, namespace=namespace.name)

    # --- tables ----------------------------------------------------------------------------------

    def table(self, encoded_namespace: str, name: str) -> Any:
        """A committed table. `<table>.<metadata table>` (`crm.t.refs`) arrives as table `refs` in the
        namespace `crm\x1ft`: "no such table" lets the client load it as t's metadata table."""
        if "\x1f" in encoded_namespace:
            raise RestError(404, "NoSuchTableException", f"Table does not exist: {encoded_namespace}.{name}")
        namespace = self.namespace(encoded_namespace)
        table = namespace.tables.get(name)
        if table is None or table.metadata_location is None:
            raise RestError(404, "NoSuchTableException", f"Table does not exist: {namespace.name}.{name}")
        return table

    def load_table(self, namespace: str, name: str) -> dict[str, Any]:
        table = self.table(namespace, name)
        return {
            "metadata-location": table.metadata_location,
            "metadata": json.loads(self._read(table.metadata_location)),
            "config": {},
        }

    def create_table(self, encoded_namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """S3 Tables' CreateTable (the table's storage is S3 Tables' choice: a requested location is
        ignored), then its first metadata file; a staged create writes none, its commit does."""
        from pyiceberg.catalog.rest import CreateTableRequest
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
        from pyiceberg.table.metadata import new_table_metadata
        from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

        # the spec's optional fields, which pyiceberg's model wants present
        request = CreateTableRequest.model_validate(
            {"location": None, "partition-spec": None, "write-order": None, **body}
        )
        namespace = self.namespace(encoded_namespace).name
        table = self.bucket.namespaces[namespace].tables.get(request.name)
        if table is not None and table.metadata_location is not None:
            raise RestError(409, "AlreadyExistsException", f"Table exists: {namespace}.{request.name}")
        if table is None:  # else a staged create that never committed left it: S3 Tables' table is reused
            table = self.tables.create_table(
                table_bucket_arn=self.arn, namespace=namespace, name=request.name, format="ICEBERG"
            )
        metadata = new_table_metadata(
            request.table_schema,
            request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
            request.write_order or UNSORTED_SORT_ORDER,
            table.warehouse_location,
            dict(request.properties),
        )
        if request.stage_create:
            return {"metadata": json.loads(metadata.model_dump_json()), "config": {}}
        return self._publish(table, metadata, version=0)

    def commit(self, encoded_namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """UpdateTable: the requirements hold against the current metadata (else 409, and the client
        retries on the new metadata), the updates are applied, the table points at the result."""
        from pyiceberg.catalog import MetastoreCatalog
        from pyiceberg.exceptions import CommitFailedException
        from pyiceberg.table import CommitTableRequest
        from pyiceberg.table.metadata import TableMetadataUtil
        from pyiceberg.table.update import update_table_metadata

        namespace = self.namespace(encoded_namespace)
        # the identifier is optional in the request body (the Java client names the table in the path)
        identifier = {"namespace": [namespace.name], "name": name}
        request = CommitTableRequest.model_validate({"identifier": identifier, **body})
        with _COMMITS:
            table = namespace.tables.get(name)
            if table is None:
                raise RestError(404, "NoSuchTableException", f"Table does not exist: {namespace.name}.{name}")
            location = table.metadata_location
            base = TableMetadataUtil.parse_raw(self._read(location)) if location else None
            try:
                for requirement in request.requirements:
                    _check(requirement, base)
            except CommitFailedException as error:
                raise RestError(409, "CommitFailedException", str(error)) from None
            try:
                metadata = update_table_metadata(
                    base or MetastoreCatalog._empty_table_metadata(),
                    tuple(request.updates),
                    enforce_validation=base is None,
                    metadata_location=location,
                )
            except ValueError as error:
                raise RestError(400, "BadRequestException", str(error)) from None
            version = _version(location) + 1 if location else 0
            return self._publish(table, metadata, version)

    def drop_table(self, encoded_namespace: str, name: str) -> None:
        """S3 Tables' DeleteTable, which removes the table's storage with it (purge or not)."""
        namespace = self.namespace(encoded_namespace)
        if name not in namespace.tables:
            raise RestError(404, "NoSuchTableException", f"Table does not exist: {namespace.name}.{name}")
        self.tables.delete_table(table_bucket_arn=self.arn, namespace=namespace.name, name=name)

    def rename_table(self, body: dict[str, Any]) -> None:
        source, destination = body["source"], body["destination"]
        [namespace], [new_namespace] = source["namespace"], destination["namespace"]
        self.table(namespace, source["name"])
        if destination["name"] in self.namespace(new_namespace).tables:
            raise RestError(409, "AlreadyExistsException", f"Table already exists: {destination['name']}")
        self.tables.rename_table(
            table_bucket_arn=self.arn,
            namespace=namespace,
            name=source["name"],
            new_namespace_name=new_namespace,
            new_name=destination["name"],
        )

    # --- metadata files --------------------------------------------------------------------------

    def _publish(self, table: Any, metadata: Any, version: int) -> dict[str, Any]:
        """Write `metadata` as the table's next metadata file and point the table at it."""
        text = metadata.model_dump_json()
        location = f"{table.warehouse_location}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"
        bucket, _, key = location.removeprefix("s3://").partition("/")
        self.s3.put_object(bucket, key, text.encode())
        self.tables.update_table_metadata_location(
            table_bucket_arn=self.arn,
            namespace=table.namespace,
            name=table.name,
            version_token=table.version_token,
            metadata_location=location,
        )
        return {"metadata-location": location, "metadata": json.loads(text), "config": {}}

    def _read(self, location: str) -> bytes:
        bucket, _, key = location.removeprefix("s3://").partition("/")
        return self.s3.get_object(bucket, key).value


def _check(requirement: Any, base: Any) -> None:
    """A commit requirement, as the REST spec (and Iceberg's own UpdateRequirement) has it. pyiceberg's
    assert-ref-snapshot-id also refuses any branch but main on a table with no snapshot, which Iceberg
    allows: `CREATE BRANCH` on a new, empty table (a quality-gated table's first batch) commits one."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.table.update import AssertRefSnapshotId

    if not isinstance(requirement, AssertRefSnapshotId) or base is None:
        requirement.validate(base)
        return
    ref = base.refs.get(requirement.ref)
    found = ref.snapshot_id if ref is not None else None
    if found != requirement.snapshot_id:
        raise CommitFailedException(
            f"Requirement failed: {requirement.ref} is at {found}, expected {requirement.snapshot_id}"
        )


def _single_level(encoded: str) -> str:
    """S3 Tables namespaces have one level (the REST path joins levels with 0x1F)."""
    if "\x1f" in encoded:
        raise RestError(400, "BadRequestException", f"S3 Tables namespaces have one level: {encoded!r}")
    return encoded


def _version(metadata_location: str) -> int:
    match = _METADATA_NAME.match(metadata_location.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else -1


def patch() -> None:
    """Route `/iceberg/...` of the `s3tables` service (requests signed for it) to `handle`."""
    from moto.s3tables import urls

    urls.url_paths.setdefault(ROUTE, handle)
