"""The storage layer: the only code that holds SQL and files.

`catalog` (metadata), `volume` (record batches), `connection` (pragmas, one place),
`batch` (the batch codec), `segments` (placing, appending, rolling partitionlets),
`log` (reading one partition's chain).
"""
