"""S3 arrival -> ledger -> job run: the logic behind ``lambda/s3_arrival``.

Shipped to the Lambda with the ledger: standard library, boto3 and aws-lambda-powertools only (no
pydantic, no pyspark). Events, routes, launch, settings and logs are separate modules; the flow and
its retry guarantees are described in docs/ledger_and_trigger.md.
"""

from lakeloader.contract import normalise_prefix
from lakeloader.trigger.events import ObjectEvent, correlation_id_for, is_sweep, parse_event
from lakeloader.trigger.handler import Trigger, TriggerError, handle_event
from lakeloader.trigger.launch import (
    EMR_CONCURRENCY_ERRORS,
    ENGINES,
    GLUE_CONCURRENCY_ERRORS,
    Launcher,
    aws_client,
    clear_clients,
)
from lakeloader.trigger.logs import configure_logging
from lakeloader.trigger.routes import TableRoute, cached_routes, clear_route_cache, load_routes, match_route
from lakeloader.trigger.settings import SettingsError, TriggerSettings


def clear_caches() -> None:
    """Forget cached routes and clients (tests; a changed endpoint)."""
    clear_route_cache()
    clear_clients()


__all__ = [
    "EMR_CONCURRENCY_ERRORS",
    "ENGINES",
    "GLUE_CONCURRENCY_ERRORS",
    "Launcher",
    "ObjectEvent",
    "SettingsError",
    "TableRoute",
    "Trigger",
    "TriggerError",
    "TriggerSettings",
    "aws_client",
    "cached_routes",
    "clear_caches",
    "configure_logging",
    "correlation_id_for",
    "handle_event",
    "is_sweep",
    "load_routes",
    "match_route",
    "normalise_prefix",
    "parse_event",
]
