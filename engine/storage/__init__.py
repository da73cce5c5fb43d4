"""The storage layer: the only code that holds SQL and files.

`catalog` (metadata), `volume` (record batches), `connection` (pragmas, one place),
`batch` (the batch codec), `placement` (which volume takes a new partitionlet),
`appender` (appending and rolling partitionlets), `chain_lock` (maintenance jobs one at a
time), `log` (reading one partition's chain), `scan` (Spark's plan), `archive` (Parquet).

Its classes take the parts they use (the catalog, the volumes, a `Clock`, settings),
never the `Cluster`, which builds them from its own.
"""
