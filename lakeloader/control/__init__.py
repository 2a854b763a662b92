"""The control plane, what runs on AWS Lambda: the S3-arrival trigger, the run ledger, the config store,
the readers' grants, the table bucket's teardown, and the names every side shares (the contract, the
runtime table). Standard library, boto3 and Powertools only, and nothing of lakeloader outside this
folder: a Lambda bundle is its handler folder and this one (infra.lambda_code). The jobs, the CLI and
`cdk synth` import it too."""
