#!/bin/sh
# The Python of the Spark tests' Python workers (PYSPARK_PYTHON, set by conftest.py): the
# interpreter $PLET_WORKER_PYTHON, without the pyspark.zip that Spark puts first on every
# worker's PYTHONPATH, so that pyspark comes from the installed package, whose bytecode is
# cached. From the zip every worker compiles pyspark again: 1.3 s of CPU instead of 0.4 s,
# too slow on a busy machine for the 10 s that Spark (hard-coded) gives a stream reader's
# Python process to connect back. The same pyspark either way (the zip ships in its wheel).
set -f
old_ifs=$IFS
IFS=:
path=
for entry in $PYTHONPATH; do
    case $entry in
        */pyspark.zip) ;;
        *) path=${path:+$path:}$entry ;;
    esac
done
IFS=$old_ifs
PYTHONPATH=$path exec "$PLET_WORKER_PYTHON" "$@"
