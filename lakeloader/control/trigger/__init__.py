"""S3 arrival -> ledger -> job run: the logic behind ``lambda/s3_arrival``.

Shipped to the Lambda with the ledger: standard library, boto3 and aws-lambda-powertools only (no
pydantic, no pyspark). Each invocation is read once into a typed event (events) and handed to the
`Trigger` handler of its kind (handler), which starts runs through `RunStarter` (starts, launch); the
flow and its retry guarantees are described in docs/ledger_and_trigger.md.
"""

from lakeloader.control.trigger.events import ObjectsArrived, RebuildRequest, SweepRequest, read_invocation
from lakeloader.control.trigger.handler import Trigger, TriggerError, handle_event
from lakeloader.control.trigger.launch import clear_clients
from lakeloader.control.trigger.routes import TableRoute, clear_route_cache, match_routes
from lakeloader.control.trigger.settings import TriggerSettings, TriggerSettingsError


def clear_caches() -> None:
    """Forget cached routes and clients (tests; a changed endpoint)."""
    clear_route_cache()
    clear_clients()


__all__ = [
    "ObjectsArrived",
    "RebuildRequest",
    "SweepRequest",
    "TriggerSettingsError",
    "TableRoute",
    "Trigger",
    "TriggerError",
    "TriggerSettings",
    "clear_caches",
    "handle_event",
    "match_routes",
    "read_invocation",
]
