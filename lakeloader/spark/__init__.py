"""What runs where Spark runs (the Glue and EMR Serverless jobs, and `lakeloader` on a laptop): the
SparkSession per runtime (`session`), and the helpers every job-side layer shares: identifier quoting
(`sql`), the engine's meta columns (`columns`), finding raw files (`inputs`), type widening
(`type_changes`), user-caused errors (`errors`), progress lines and summaries (`progress`), the fault
suite's crash points (`faults`), the next command to suggest (`next_step`) and who acts (`actor`).
Only `session` and `type_changes` import PySpark; nothing here imports the layers above."""
