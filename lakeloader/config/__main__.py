"""python -m lakeloader.config [config/tables.schema.json]: regenerate the editors' JSON Schema."""

import sys

from lakeloader.config.lake import write_json_schema

if __name__ == "__main__":  # the job zip's import check imports every module; importing must not write
    write_json_schema(sys.argv[1] if len(sys.argv) > 1 else "config/tables.schema.json")
