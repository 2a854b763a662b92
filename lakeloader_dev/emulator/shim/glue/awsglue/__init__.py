"""A minimal stand-in for AWS Glue's ``awsglue`` package (only what lakeloader's scripts use).

The embedded emulator puts this folder on PYTHONPATH when it runs a Glue job's deployed
script on local Spark; on AWS Glue the real package is used.
"""
