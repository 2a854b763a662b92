"""lakeloader: config-driven CDC merge of raw S3 files into Apache Iceberg tables.

The package root imports nothing heavy: the Lambda ships parts of it as plain
Python, and `cdk synth` validates the config without a JVM.
"""

__version__ = "0.1.0"
