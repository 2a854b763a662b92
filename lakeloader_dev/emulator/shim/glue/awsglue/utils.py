"""``getResolvedOptions`` as AWS Glue documents it: ``--name value`` (or ``--name=value``) pairs."""

from __future__ import annotations


class GlueArgumentError(Exception):
    """A requested argument is absent from argv (Glue raises the same way)."""


def getResolvedOptions(args: list[str], options: list[str]) -> dict[str, str]:  # noqa: N802 - Glue's name
    found: dict[str, str] = {}
    index = 1 if args and not args[0].startswith("--") else 0
    while index < len(args):
        token = args[index]
        if token.startswith("--"):
            name = token[2:]
            if "=" in name:
                name, value = name.split("=", 1)
                index += 1
            elif index + 1 < len(args) and not args[index + 1].startswith("--"):
                value = args[index + 1]
                index += 2
            else:
                value = ""
                index += 1
            found[name] = value
        else:
            index += 1
    missing = [name for name in options if name not in found]
    if missing:
        raise GlueArgumentError(
            f"the following arguments are required: {', '.join('--' + m for m in missing)}"
        )
    return {name: found[name] for name in options}
